"""IMDB sentiment with Embedding + LSTM: the last hidden state of a one-layer LSTM
feeds a linear classifier (positive / negative).

Real IMDB is read from $VTL_DATA/aclImdb (see datasets_imdb.py); without it the
example trains on synthetic reviews and says so.
"""

from _common import imdb, report, setup

import vtl
from vtl import nn, optim


class SentimentLSTM(nn.Module):
    def __init__(self, vocab_size: int, embed: int = 32, hidden: int = 32) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed, padding_idx=0)
        self.lstm = nn.LSTM(embed, hidden, batch_first=True)
        self.head = nn.Linear(hidden, 2)

    def forward(self, ids):
        _, (h, _) = self.lstm(self.embedding(ids))      # h: (layers, batch, hidden)
        return self.head(h[-1])


args = setup(__doc__.splitlines()[0], epochs=3, max_len=128)
epochs = 6 if args.quick else args.epochs
max_len = 24 if args.quick else args.max_len
train, test, vocab = imdb(max_len, count=None if not args.quick else 256, quick=args.quick)
print(f"{len(train)} train / {len(test)} test reviews, vocabulary {len(vocab)}, "
      f"length {max_len}")

vtl.random.seed(0)
model = SentimentLSTM(len(vocab))
history = vtl.train.fit(
    model, vtl.data.DataLoader(train, batch_size=32, shuffle=True, seed=0),
    nn.CrossEntropyLoss(), optim.Adam(model.parameters(), lr=5e-3), epochs,
    val_loader=vtl.data.DataLoader(test, batch_size=128), clip_grad_norm=1.0)
report(history)
print(f"test accuracy: {history['val_accuracy'][-1]:.3f}")
