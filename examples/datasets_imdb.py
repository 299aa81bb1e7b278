"""IMDB loading: reviews, tokens, the vocabulary and padded id sequences.

Put the unpacked aclImdb folder in $VTL_DATA (or pass download=True to
vtl.datasets.IMDB); without it this example uses synthetic reviews.
"""

from _common import imdb, setup

args = setup(__doc__.splitlines()[0])

train, test, vocab = imdb(max_len=64, count=1000 if args.quick else None, quick=args.quick)
ids, labels = train.tensors
print(f"train: {len(train)} reviews, test: {len(test)} reviews, vocabulary: {len(vocab)} tokens")
print(f"ids {tuple(ids.shape)} {ids.dtype}; labels {labels.dtype}, "
      f"positive fraction {float(labels.sum()) / len(train):.2f}")
print("first review:", train.texts[0][:100])
first = [i for i in ids[0].tolist() if i != vocab.pad_index]
print("its first tokens:", vocab.decode(first[:12]))
print("most frequent tokens:", vocab.itos[2:12])
