"""alt-profanity-check's offensive-language classifier as the toxicity classifier (offline, CPU, deterministic).

The pip package ships a trained linear model in its wheel: a TF-IDF bag of words and a calibrated linear SVM,
trained on about 200k human-labelled comments (Davidson et al.'s hate-speech-and-offensive-language tweets and
Jigsaw's toxic Wikipedia comments) for profanity / offensive language. It is not Perspective's TOXICITY: it
reacts to offensive words (and misses misspelt ones such as "f4ck"), not to veiled insults or threats, so the
scorer is named for what it measures and its numbers are not comparable with HELM's Perspective ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import metadata

PACKAGE = "alt-profanity-check"


class OffensiveLanguageClassifier:
    """The probability that a text is offensive language, from alt-profanity-check's shipped model."""

    def __init__(self) -> None:
        # Imported here, not at module level: it loads scikit-learn and unpickles the model (~2 s). With the
        # pinned scikit-learn (the package pins the one its model was pickled with) loading warns about nothing.
        from profanity_check import predict_prob

        self._predict_prob = predict_prob
        self.name = f"{PACKAGE}:{metadata.version(PACKAGE)} (offensive language)"

    def score(self, texts: Sequence[str]) -> list[float]:
        # An empty (or blank) output is not offensive: score it 0 rather than the model's bias (about 0.04), as
        # the other classifiers do. The rest go in one batch; each row is scored independently of the others.
        nonblank = [i for i, t in enumerate(texts) if t.strip()]
        out = [0.0] * len(texts)
        if nonblank:  # predict_prob raises on an empty list
            for i, p in zip(nonblank, self._predict_prob([texts[i] for i in nonblank]), strict=True):
                out[i] = float(p)
        return out
