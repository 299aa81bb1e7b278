"""XOR: a 2-16-2 tanh network learns the classic non-linearly-separable problem.

The points scatter around the four corners with noise of std 0.5, so the four clouds
overlap a little: about 4 points in 100 lie in another corner's quadrant, and no
classifier gets every one right.
"""

from _common import report, setup

import vtl
from vtl import nn, optim

args = setup(__doc__.splitlines()[0], epochs=100)
epochs = 30 if args.quick else args.epochs

vtl.random.seed(0)
train = vtl.datasets.synthetic.xor(400, noise=0.5, seed=0)
test = vtl.datasets.synthetic.xor(400, noise=0.5, seed=1)
model = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 2))
history = vtl.train.fit(model, vtl.data.DataLoader(train, batch_size=32, shuffle=True, seed=0),
                        nn.CrossEntropyLoss(), optim.Adam(model.parameters(), lr=0.01), epochs,
                        val_loader=vtl.data.DataLoader(test, batch_size=400))
report(history)
print(f"test accuracy: {history['val_accuracy'][-1]:.4f}")
corners = vtl.asarray([[-1.0, -1.0], [-1.0, 1.0], [1.0, -1.0], [1.0, 1.0]])
with vtl.no_grad():
    pred = vtl.argmax(model(corners), axis=1)
print("predictions at the corners (expect 0 1 1 0):", pred.tolist())
