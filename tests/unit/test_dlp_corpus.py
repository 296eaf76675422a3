"""The redactor on the independent labelled corpus holds recall and precision floors.

The corpus (``tests/fixtures/dlp_corpus/corpus.jsonl``) is written by someone who does not read
the detectors; scoring is in ``dlp_corpus``. Measured when these floors were set (217 documents,
1,109 positives, 1,226 negatives): recall 0.995 overall and 0.992 on secrets, precision 0.996,
4 negatives touched (two DKIM signatures' hashes and signatures, which look like keys); since the
``login: user / password`` pairs and a PEM block's escaped final line break in JSON, recall
1.000 on both. The floors leave room for a few new shapes as the corpus grows, not for a
regression of a mechanism: a detector that stopped reading one format would cost several points
of recall at once.
"""

from __future__ import annotations

import pytest
from dlp_corpus import CORPUS, SECRET_KINDS, Score, load_corpus, score

from context_ledger.dlp.redaction import Redactor

RECALL_FLOOR = 0.98
SECRET_RECALL_FLOOR = 0.98
PRECISION_FLOOR = 0.98
#: Negatives (UUIDs, hashes, images, references...) any finding may touch, of 1,200+.
MAX_NEGATIVES_TOUCHED = 8


@pytest.fixture(scope="module")
def corpus_score() -> Score:
    return score(load_corpus(CORPUS), Redactor())


def test_corpus_recall_on_secrets_is_at_least_098(corpus_score: Score) -> None:
    assert corpus_score.secret_recall >= SECRET_RECALL_FLOOR, [
        missed for missed in corpus_score.missed if missed[1] in SECRET_KINDS
    ]


def test_corpus_recall_overall_is_at_least_098(corpus_score: Score) -> None:
    assert corpus_score.recall >= RECALL_FLOOR, corpus_score.missed


def test_corpus_precision_is_at_least_098(corpus_score: Score) -> None:
    assert corpus_score.precision >= PRECISION_FLOOR, corpus_score.false_positives


def test_corpus_negatives_are_left_untouched_but_a_handful(corpus_score: Score) -> None:
    assert corpus_score.negatives_touched <= MAX_NEGATIVES_TOUCHED, corpus_score.touched


def test_every_kind_of_the_corpus_is_caught_nine_times_in_ten(corpus_score: Score) -> None:
    tally = corpus_score.recall_by_kind
    weak = {kind: tally.rate([kind]) for kind in tally.total if tally.rate([kind]) < 0.9}
    assert weak == {}
