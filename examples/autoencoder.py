"""Autoencoder: compress the 8x8 Digits to 8 numbers and reconstruct them."""

from _common import report, setup

import vtl
from vtl import nn, optim

args = setup(__doc__, epochs=40)
epochs = 8 if args.quick else args.epochs

vtl.random.seed(0)
digits = vtl.datasets.Digits(train=True)
images = digits.data if not args.quick else digits.data[:512]
data = vtl.data.TensorDataset(images, images)          # the target is the input
loader = vtl.data.DataLoader(data, batch_size=64, shuffle=True, seed=0)
encoder = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 8))
decoder = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 64), nn.Sigmoid())
model = nn.Sequential(encoder, decoder)
history = vtl.train.fit(model, loader, nn.MSELoss(), optim.Adam(model.parameters(), lr=3e-3),
                        epochs, metrics=("mae",))
report(history)
with vtl.no_grad():
    codes = encoder(images[:3])
    recon = decoder(codes)
print("codes of the first 3 digits:", [[round(v, 2) for v in c] for c in codes.tolist()])
print(f"reconstruction MAE: {vtl.metrics.mean_absolute_error(recon, images[:3]):.4f}")
