"""Metrics for generated summaries (and overlap metrics shared with translation).

Reference metrics (against each gold summary; an instance's value is the maximum over its references):
- rouge_2, rouge_l: ROUGE-2 and ROUGE-L F-measures with Porter stemming, from Google's `rouge-score` (HELM's
  definitions). One scorer computes both, and a pair's scores are cached, so listing both costs one pass.
- bleu: sentence-level BLEU-4 from `sacrebleu` (its default tokenizer and exponential smoothing), in [0, 1].
  HELM's bleu_4 calls nltk's sentence_bleu on word_tokenize output, which needs downloaded tokenizer data
  and fails offline; sacrebleu is the reference implementation of BLEU and carries its own tokenizer.

Extractiveness against the source document (the opt-in scorer `summarization`, HELM's SummarizationMetric data
statistics, after Grusky et al. 2018, "Newsroom"): the summary's extractive fragments are found by a greedy scan
(`extractive_fragments`), then, with A the document's tokens, S the summary's and F the fragments:
- summarization_coverage = sum |f| / |S|: the share of summary words that lie in some copied fragment;
- summarization_density = sum |f|^2 / |S|: the mean length of the fragment a summary word lies in;
- summarization_compression = |A| / |S|: how many document words one summary word stands for.
As HELM (summ_eval's DataStatsMetric on Newsroom's Fragments), all three are 0 when the summary has no tokens
(an empty generation: Newsroom answers 0 to a zero denominator), and the instance keeps its rows.

Tokenization: HELM tokenizes with spaCy's en_core_web_sm pipeline (a model downloaded at run time; spaCy is not
a dependency here) and compares tokens lower-cased. `tokenize` is a deterministic stand-in that follows spaCy's
English rules on the common cases: lower-case words, each punctuation mark its own token, hyphenated words split
at the hyphen, numbers with inner separators (5.00, 1,000, 18:00), dotted abbreviations and initials (u.s., f.),
titles (mr., dr.), web and e-mail addresses kept whole, clitics split off ("don't" -> do n't, "it's" -> it 's),
whitespace other than a single space (a line break in the summary) a token of its own. It differs from spaCy on
rarer forms (spaCy's longer exception lists: "dont" -> do nt, U.K.-based, rock'n'roll, emoticons), so token
counts can differ slightly from HELM's.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Sequence
from functools import cache, lru_cache
from typing import TYPE_CHECKING

from holistic_dagster.metrics.registry import declare, reference_metric, scorer
from holistic_dagster.records import InstanceScore, ScenarioMetric

if TYPE_CHECKING:
    from holistic_dagster.metrics.scoring import ScoringInput


@cache
def _rouge():
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rouge2", "rougeL"], use_stemmer=True)


@lru_cache(maxsize=1024)
def _rouge_scores(gold: str, pred: str) -> dict:
    """Both ROUGE scores of a pair: scoring asks for rouge_2 and rouge_l of the same pair one after the other."""
    return _rouge().score(gold, pred)


@reference_metric("rouge_2", "ROUGE-2 F-measure (rouge-score, Porter stemming)")
def rouge_2(gold: str, pred: str) -> float:
    return float(_rouge_scores(gold, pred)["rouge2"].fmeasure)


@reference_metric("rouge_l", "ROUGE-L F-measure: longest common subsequence (rouge-score, Porter stemming)")
def rouge_l(gold: str, pred: str) -> float:
    return float(_rouge_scores(gold, pred)["rougeL"].fmeasure)


@reference_metric("bleu", "sentence BLEU-4 (sacrebleu), in [0, 1]")
def bleu(gold: str, pred: str) -> float:
    import sacrebleu

    return min(1.0, float(sacrebleu.sentence_bleu(pred, [gold]).score / 100))  # (1 + 4e-16 on a perfect match)


# --- extractiveness (Grusky et al. 2018) ---

COVERAGE, DENSITY, COMPRESSION = "summarization_coverage", "summarization_density", "summarization_compression"
UNBOUNDED = (0.0, math.inf)

declare(COVERAGE, "accuracy", "share of the summary's words inside fragments copied from the document (Newsroom)",
        per_instance=True, mean_of_instances=True)  # fmt: skip
declare(DENSITY, "accuracy", "mean squared length of the copied fragments per summary word (Newsroom)",
        bounds=UNBOUNDED, per_instance=True, mean_of_instances=True)  # fmt: skip
declare(COMPRESSION, "accuracy", "document words per summary word (Newsroom)", bounds=UNBOUNDED, per_instance=True,
        mean_of_instances=True)  # fmt: skip

# spaCy's English tokens that keep their period (case counts: "Ill." is Illinois, "ill." a word and a period)
_ABBREVIATIONS = (
    "Adm Ak Ala Apr Ariz Ark Aug Bros Calif Co Colo Conn Corp Dec Del Dr Feb Fla Ga Gen Gov Ia Id Ill Inc Ind Jan "
    "Jr Jul Jun Kan Kans Ky La Ltd Mar Mass Md Messrs Mich Minn Miss Mo Mont Mr Mrs Ms Mt Neb Nebr Nev Nov Oct "
    "Okla Ore Pa Prof Rep Rev Sen Sep Sept St Tenn Va Wash Wis co vs"
).split()
_CLITIC = r"(?i:s|m|d|ll|re|ve)\b"  # 's 'm 'd 'll 're 've
_TOKEN = re.compile(
    rf"""
      (?:https?://|www\.)\S*[\w/]       # a web address
    | [\w.+-]+@\w+(?:[.-]\w+)*\.\w+     # an e-mail address
    | (?:{"|".join(_ABBREVIATIONS)}|Ph\.D)\.(?!\w) | and/or | w/o    # spaCy's exceptions: Mr. Jan. Calif.
    | (?:[^\W\d_]\.)+(?!\w)             # dotted abbreviations and initials: U.S., e.g., F.
    | \d+(?:[.,:]\d+)+                  # numbers with inner separators: 5.00, 1,000, 18:00
    | \w+(?=(?i:n['’]t)\b)              # the word before a negative clitic: do|n't, ca|n't
    | (?i:can)(?=(?i:not)\b)            # can|not
    | (?i:n['’]t)\b                     # the negative clitic itself
    | ['’]{_CLITIC}                     # other clitics
    | \w*[^\W\d_](?:-\d\w*)+            # a word, hyphen, number: covid-19
    | \w+(?:(?:['’](?!{_CLITIC})|&|/(?=\d))\w+)*  # words, also o'neill, at&t, 9/11 (not well-known: well - known)
    | \.{{2,}} | -{{2,}}                  # an ellipsis, a dash written as hyphens
    | [^\w\s]                           # any other mark
    """,
    re.VERBOSE,
)


def tokenize(text: str) -> list[str]:
    """Lower-case word and punctuation tokens, following spaCy's English tokenizer (see the module docstring).
    As in spaCy, whitespace separates tokens, and a run of it other than the one space after a token (a line
    break, a double space) is a token of its own: "a\\n\\nb" -> "a", "\\n\\n", "b"."""
    tokens: list[str] = []
    for m in re.finditer(r"\s+|\S+", text):
        chunk = m.group()
        if not chunk.isspace():
            tokens += [t.lower() for t in _TOKEN.findall(chunk)]
            continue
        if m.start() > 0 and chunk[0] == " ":  # the space that ends the token before it
            chunk = chunk[1:]
        if chunk:
            tokens.append(chunk)
    return tokens


def extractive_fragments(article_tokens: Sequence[str], summary_tokens: Sequence[str]) -> list[list[str]]:
    """The summary's extractive fragments: Grusky et al.'s greedy procedure (Newsroom, Algorithm 1). From the
    summary's first token on, take the longest run of summary tokens that also occurs, in order and contiguous,
    in the article, and continue after it (after the token, when the token occurs nowhere in the article).

    As published (and as HELM computes it), the scan for that longest run walks the article left to right and,
    after measuring a run, resumes *after* it: a longer run that starts inside a shorter one is not seen (article
    "a a a b", summary "a a b": fragments "a a" and "b", not "a a b")."""
    positions: dict[str, list[int]] = defaultdict(list)
    for j, token in enumerate(article_tokens):
        positions[token].append(j)
    fragments: list[list[str]] = []
    i = 0
    while i < len(summary_tokens):
        longest = resume = 0
        for j in positions.get(summary_tokens[i], ()):
            if j < resume:  # inside the run measured last
                continue
            n = 1
            while (
                i + n < len(summary_tokens)
                and j + n < len(article_tokens)
                and summary_tokens[i + n] == article_tokens[j + n]
            ):
                n += 1
            longest = max(longest, n)
            resume = j + n
        if longest:
            fragments.append(list(summary_tokens[i : i + longest]))
        i += max(longest, 1)
    return fragments


def _remove_braces(text: str) -> str:
    """HELM drops one leading "{" and one trailing "}" (its summarization prompts wrap texts in braces)."""
    return text.removeprefix("{").removesuffix("}")


def summarization_stats(article: str, summary: str) -> dict[str, float]:
    """Coverage, density and compression of `summary` against `article` (keys: the metric names), as HELM
    computes them: braces dropped, the summary stripped, the article's whitespace collapsed (HELM's scenarios
    do so before the model sees it, so the document has no line-break tokens). All 0 for a summary without
    tokens, as in HELM (Newsroom's answer to a zero denominator)."""
    article_tokens = tokenize(" ".join(_remove_braces(article).split()))
    summary_tokens = tokenize(_remove_braces(summary.strip()))
    if not summary_tokens:
        return {COVERAGE: 0.0, DENSITY: 0.0, COMPRESSION: 0.0}
    lengths = [len(f) for f in extractive_fragments(article_tokens, summary_tokens)]
    n = len(summary_tokens)
    return {
        COVERAGE: sum(lengths) / n,
        DENSITY: sum(k * k for k in lengths) / n,
        COMPRESSION: len(article_tokens) / n,
    }


@scorer("summarization", "accuracy", (COVERAGE, DENSITY, COMPRESSION), extra=True, open_ended=True)
def summarization(given: ScoringInput) -> tuple[list[InstanceScore], list[ScenarioMetric]]:
    """Each generated summary's extractiveness against the instance's input (the document the model was shown);
    the scenario values are the means of these rows (mean_of_instances)."""
    rows = []
    for p in given.predictions:
        for name, value in summarization_stats(p.instance.input, p.text).items():
            rows.append(InstanceScore(p.instance.instance_id, name, "accuracy", value, p.carrier.request_id, p.text))
    return rows, []


# --- HELM's BLEU (its translation headline, WMT14's bleu_4) ---


@cache
def _word_tokenize():
    from nltk.tokenize import word_tokenize

    from holistic_dagster.metrics.punkt import punkt_ready

    punkt_ready()
    return word_tokenize


def _helm_bleu(gold: str, pred: str, weights: tuple[float, ...]) -> float:
    import warnings

    from nltk.translate.bleu_score import sentence_bleu

    tokenize = _word_tokenize()
    with warnings.catch_warnings():  # nltk warns when an n-gram order has no match (the score is then 0)
        warnings.simplefilter("ignore")
        return float(sentence_bleu([tokenize(gold)], tokenize(pred), weights=weights))


@reference_metric("bleu_1", "HELM's BLEU-1: nltk's sentence_bleu, unigram precision only, on word_tokenize tokens")
def bleu_1(gold: str, pred: str) -> float:
    return _helm_bleu(gold, pred, (1, 0, 0, 0))


@reference_metric("bleu_4", "HELM's BLEU-4 (WMT14's headline): nltk's sentence_bleu, 4-gram precision only")
def bleu_4(gold: str, pred: str) -> float:
    return _helm_bleu(gold, pred, (0, 0, 0, 1))
