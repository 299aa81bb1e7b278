"""XOR: a 2-16-2 tanh network learns the classic non-linearly-separable problem."""

from _common import report, setup

import vtl
from vtl import nn, optim

args = setup(__doc__, epochs=100)
epochs = 30 if args.quick else args.epochs

vtl.random.seed(0)
data = vtl.datasets.synthetic.xor(400, noise=0.1, seed=0)
loader = vtl.data.DataLoader(data, batch_size=32, shuffle=True, seed=0)
model = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 2))
history = vtl.train.fit(model, loader, nn.CrossEntropyLoss(),
                        optim.Adam(model.parameters(), lr=0.01), epochs)
report(history)
print(f"accuracy: {history['accuracy'][-1]:.3f}")
corners = vtl.asarray([[-1.0, -1.0], [-1.0, 1.0], [1.0, -1.0], [1.0, 1.0]])
with vtl.no_grad():
    pred = vtl.argmax(model(corners), axis=1)
print("predictions at the corners (expect 0 1 1 0):", pred.tolist())
