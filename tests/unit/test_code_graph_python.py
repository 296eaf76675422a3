"""The Python code graph: module-aware ``calls`` and pytest ``tested_by`` edges over a small package
(``tests/fixtures/code_graph/python``), plus small snapshots for single rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from code_graph_support import Pair, load, pairs

from context_ledger.sources.code_graph import build_code_graph
from context_ledger.sources.model import Document, EdgeRelation, SymbolEdge

FIXTURE = Path(__file__).parents[1] / "fixtures" / "code_graph" / "python"

SERVICE = "shop/refunds/service.py"
LIMITS = "shop/refunds/limits.py"
LEDGER = "shop/ledger.py"
REPORTS = "shop/reports.py"
CONFTEST = "tests/conftest.py"
TEST_REFUNDS = "tests/test_refunds.py"
TEST_REPORTS = "tests/test_reports.py"


def python(files: dict[str, str]) -> list[Document]:
    return [Document(path=path, content=content) for path, content in files.items()]


@pytest.fixture(scope="module")
def edges() -> list[SymbolEdge]:
    return build_code_graph(load(FIXTURE))


@pytest.fixture(scope="module")
def calls(edges: list[SymbolEdge]) -> set[Pair]:
    return pairs(edges, EdgeRelation.CALLS)


@pytest.fixture(scope="module")
def tested_by(edges: list[SymbolEdge]) -> set[Pair]:
    return pairs(edges, EdgeRelation.TESTED_BY)


def test_calls_are_exactly_the_resolvable_ones(calls: set[Pair]) -> None:
    assert calls == {
        (f"{LEDGER}:Ledger.post", f"{LEDGER}:validate"),
        (f"{SERVICE}:AuditedRefunds.__init__", f"{SERVICE}:Refunds.__init__"),
        (f"{SERVICE}:AuditedRefunds.authorise", f"{SERVICE}:AuditedRefunds.record"),
        (f"{SERVICE}:AuditedRefunds.authorise", f"{SERVICE}:Refunds.authorise"),
        (f"{SERVICE}:Refunds._issue", f"{LEDGER}:Entry"),
        (f"{SERVICE}:Refunds._issue", f"{LEDGER}:Ledger.post"),
        (f"{SERVICE}:Refunds._issue", f"{SERVICE}:Decision"),
        (f"{SERVICE}:Refunds._issue", f"{SERVICE}:reference"),
        (f"{SERVICE}:Refunds.authorise", f"{LIMITS}:within_limit"),
        (f"{SERVICE}:Refunds.authorise", f"{SERVICE}:Decision"),
        (f"{SERVICE}:Refunds.authorise", f"{SERVICE}:Refunds._issue"),
        (f"{SERVICE}:Refunds.authorise", f"{SERVICE}:validate"),
        (f"{SERVICE}:Refunds.cap", f"{LIMITS}:daily_cap"),
        (f"{SERVICE}:Refunds.close", f"{LEDGER}:Ledger.close"),
        (f"{SERVICE}:Refunds.with_new_ledger", f"{LEDGER}:Ledger"),
        (f"{SERVICE}:Refunds.with_new_ledger", f"{SERVICE}:Refunds"),
        (f"{SERVICE}:authorise_all", f"{SERVICE}:Refunds.authorise"),
        (f"{REPORTS}:fits", f"{LIMITS}:within_limit"),
        (f"{REPORTS}:weekly_cap", f"{SERVICE}:Refunds.cap"),
        (f"{CONFTEST}:ledger", f"{LEDGER}:Ledger"),
        (f"{CONFTEST}:refunds", f"{SERVICE}:Refunds"),
        (f"{TEST_REFUNDS}:TestRefunds.test_authorise_all", f"{SERVICE}:authorise_all"),
        (f"{TEST_REFUNDS}:TestRefunds.test_authorise_all", f"{TEST_REFUNDS}:make_requests"),
        (f"{TEST_REFUNDS}:TestRefunds.test_cap", f"{SERVICE}:Refunds.with_new_ledger"),
        (f"{TEST_REFUNDS}:audited", f"{LEDGER}:Ledger"),
        (f"{TEST_REFUNDS}:audited", f"{SERVICE}:AuditedRefunds"),
        (f"{TEST_REFUNDS}:test_authorise", f"{SERVICE}:Refunds.authorise"),
        (f"{TEST_REFUNDS}:test_validate", f"{SERVICE}:AuditedRefunds.authorise"),
        (f"{TEST_REFUNDS}:test_validate", f"{TEST_REFUNDS}:audited"),
        (f"{TEST_REFUNDS}:test_within_limit", f"{LIMITS}:within_limit"),
        (f"{TEST_REPORTS}:_first", f"{TEST_REPORTS}:_second"),
        (f"{TEST_REPORTS}:_second", f"{LEDGER}:Ledger"),
        (f"{TEST_REPORTS}:_second", f"{LEDGER}:Ledger.balance"),
        (f"{TEST_REPORTS}:_second", f"{TEST_REPORTS}:_third"),
        (f"{TEST_REPORTS}:_third", f"{LIMITS}:daily_cap"),
        (f"{TEST_REPORTS}:test_fits_through_helpers", f"{REPORTS}:fits"),
        (f"{TEST_REPORTS}:test_fits_through_helpers", f"{TEST_REPORTS}:_first"),
        (f"{TEST_REPORTS}:test_weekly_cap", f"{REPORTS}:weekly_cap"),
    }


def test_tested_by_links_what_tests_call_through_helpers_fixtures_and_names(
    tested_by: set[Pair],
) -> None:
    assert tested_by == {
        # test_authorise: annotated fixture parameter, and the fixtures refunds -> ledger.
        (f"{SERVICE}:Refunds.authorise", f"{TEST_REFUNDS}:test_authorise"),
        (f"{SERVICE}:Refunds", f"{TEST_REFUNDS}:test_authorise"),
        (f"{LEDGER}:Ledger", f"{TEST_REFUNDS}:test_authorise"),
        # test_validate: through the helper audited(), whose return annotation types the call.
        (f"{SERVICE}:AuditedRefunds.authorise", f"{TEST_REFUNDS}:test_validate"),
        (f"{SERVICE}:AuditedRefunds", f"{TEST_REFUNDS}:test_validate"),
        (f"{LEDGER}:Ledger", f"{TEST_REFUNDS}:test_validate"),
        (f"{LIMITS}:within_limit", f"{TEST_REFUNDS}:test_within_limit"),
        (f"{SERVICE}:authorise_all", f"{TEST_REFUNDS}:TestRefunds.test_authorise_all"),
        (f"{SERVICE}:Refunds", f"{TEST_REFUNDS}:TestRefunds.test_authorise_all"),
        (f"{LEDGER}:Ledger", f"{TEST_REFUNDS}:TestRefunds.test_authorise_all"),
        (f"{SERVICE}:Refunds.with_new_ledger", f"{TEST_REFUNDS}:TestRefunds.test_cap"),
        # Named, not called: TestRefunds.test_cap -> Refunds.cap.
        (f"{SERVICE}:Refunds.cap", f"{TEST_REFUNDS}:TestRefunds.test_cap"),
        (f"{REPORTS}:fits", f"{TEST_REPORTS}:test_fits_through_helpers"),
        (f"{LEDGER}:Ledger", f"{TEST_REPORTS}:test_fits_through_helpers"),
        (f"{LEDGER}:Ledger.balance", f"{TEST_REPORTS}:test_fits_through_helpers"),
        (f"{REPORTS}:weekly_cap", f"{TEST_REPORTS}:test_weekly_cap"),
        (f"{SERVICE}:Refunds", f"{TEST_REPORTS}:test_weekly_cap"),
        (f"{LEDGER}:Ledger", f"{TEST_REPORTS}:test_weekly_cap"),
    }


def test_helpers_are_followed_two_deep_but_not_three(tested_by: set[Pair]) -> None:
    test = f"{TEST_REPORTS}:test_fits_through_helpers"

    assert (f"{LEDGER}:Ledger.balance", test) in tested_by  # via _first -> _second
    assert (f"{LIMITS}:daily_cap", test) not in tested_by  # via _first -> _second -> _third


def test_a_test_name_links_only_a_unique_symbol(tested_by: set[Pair]) -> None:
    named_by_test_validate = {
        tested for tested, test in tested_by if test.endswith("test_validate")
    }

    # shop.ledger.validate and shop.refunds.service.validate: two candidates, neither is linked.
    assert not any(tested.endswith(":validate") for tested in named_by_test_validate)


def test_imports_relative_imports_and_re_exports_resolve(calls: set[Pair]) -> None:
    assert (f"{SERVICE}:Refunds.authorise", f"{LIMITS}:within_limit") in calls  # from .limits
    assert (f"{SERVICE}:Refunds.cap", f"{LIMITS}:daily_cap") in calls  # from . import limits
    assert (f"{REPORTS}:fits", f"{LIMITS}:within_limit") in calls  # import shop.refunds.limits
    assert (f"{REPORTS}:weekly_cap", f"{SERVICE}:Refunds.cap") in calls  # from shop import Refunds


def test_self_cls_and_super_resolve_through_the_class_and_its_bases(calls: set[Pair]) -> None:
    assert (f"{SERVICE}:Refunds.authorise", f"{SERVICE}:Refunds._issue") in calls
    assert (f"{SERVICE}:Refunds.with_new_ledger", f"{SERVICE}:Refunds") in calls
    assert (f"{SERVICE}:AuditedRefunds.authorise", f"{SERVICE}:Refunds.authorise") in calls


def test_an_attribute_assigned_from_an_annotated_parameter_types_its_method_calls(
    calls: set[Pair],
) -> None:
    assert (f"{SERVICE}:Refunds._issue", f"{LEDGER}:Ledger.post") in calls


def test_a_receiver_of_unknown_class_is_skipped_not_guessed(edges: list[SymbolEdge]) -> None:
    assert not any(e.from_symbol == "close_all" for e in edges)


def test_same_named_functions_of_different_modules_never_link(calls: set[Pair]) -> None:
    assert {(caller, callee) for caller, callee in calls if callee.endswith(":validate")} == {
        (f"{LEDGER}:Ledger.post", f"{LEDGER}:validate"),
        (f"{SERVICE}:Refunds.authorise", f"{SERVICE}:validate"),
    }


def test_module_names_start_at_the_outermost_package() -> None:
    documents = python(
        {
            "src/billing/__init__.py": "",
            "src/billing/tax.py": "def rate():\n    return 0.2\n",
            "src/billing/invoice.py": "from billing.tax import rate\n\ndef total(): rate()\n",
        }
    )

    assert pairs(build_code_graph(documents), EdgeRelation.CALLS) == {
        ("src/billing/invoice.py:total", "src/billing/tax.py:rate")
    }


def test_a_namespace_package_import_resolves_by_the_end_of_the_path() -> None:
    documents = python(
        {
            "lib/plugins/tax.py": "def rate():\n    return 0.2\n",
            "app.py": "import plugins.tax\n\ndef total(): return plugins.tax.rate()\n",
        }
    )

    assert pairs(build_code_graph(documents), EdgeRelation.CALLS) == {
        ("app.py:total", "lib/plugins/tax.py:rate")
    }


def test_builtins_third_party_and_shadowed_names_are_skipped() -> None:
    documents = python(
        {
            "jobs.py": """import json

import requests


def load(path):
    return json.loads(open(path).read())


def fetch(url, load=None):
    load(url)
    return requests.get(url)
""",
        }
    )

    assert build_code_graph(documents) == []


def test_class_body_calls_belong_to_the_class_and_member_calls_to_the_member() -> None:
    documents = python(
        {
            "models.py": """def default_limit():
    return 10


def clamp(value):
    return value


class Account:
    limit = default_limit()

    def set_limit(self, value):
        self.limit = clamp(value)

    class Meta:
        ordering = clamp(1)
""",
        }
    )

    assert pairs(build_code_graph(documents), EdgeRelation.CALLS) == {
        ("models.py:Account", "models.py:default_limit"),
        ("models.py:Account.set_limit", "models.py:clamp"),
        ("models.py:Account.Meta", "models.py:clamp"),
    }


def test_only_pytest_test_functions_and_test_class_methods_are_tests() -> None:
    documents = python(
        {
            "calc.py": "def add(a, b):\n    return a + b\n",
            "tests/test_calc.py": """from calc import add


def helper():
    return add(1, 1)


def test_add():
    assert add(1, 2) == 3


class TestAdd:
    def test_twice(self):
        assert add(add(1, 1), 1) == 3


class TestWithInit:
    def __init__(self):
        pass

    def test_ignored(self):
        assert add(0, 0) == 0
""",
            "tests/checks.py": "from calc import add\n\ndef test_not_collected(): add(0, 0)\n",
        }
    )

    tests = {test for _, test in pairs(build_code_graph(documents), EdgeRelation.TESTED_BY)}

    assert tests == {"tests/test_calc.py:test_add", "tests/test_calc.py:TestAdd.test_twice"}


def test_helper_modules_under_tests_are_followed_and_never_tested() -> None:
    documents = python(
        {
            "calc.py": "def add(a, b):\n    return a + b\n",
            "tests/factories.py": "from calc import add\n\n\ndef pair():\n    return add(1, 1)\n",
            "tests/test_calc.py": "from tests.factories import pair\n\n\ndef test_pair():\n"
            "    assert pair() == 2\n",
        }
    )

    assert pairs(build_code_graph(documents), EdgeRelation.TESTED_BY) == {
        ("calc.py:add", "tests/test_calc.py:test_pair")
    }


def test_annotations_type_receivers_in_every_common_spelling() -> None:
    documents = python(
        {
            "bank.py": """from typing import Optional

import bank_types


class Ledger:
    def post(self):
        pass


def make() -> "Ledger":
    return Ledger()


def by_name(ledger: Ledger):
    ledger.post()


def by_string(ledger: "Ledger"):
    ledger.post()


def by_union(ledger: Ledger | None):
    ledger.post()


def by_optional(ledger: Optional[Ledger]):
    ledger.post()


def by_re_export(ledger: bank_types.Ref):
    ledger.post()


def by_return_annotation():
    make().post()
""",
            "bank_types.py": "from bank import Ledger as Ref\n",
        }
    )

    calls = pairs(build_code_graph(documents), EdgeRelation.CALLS)

    assert {caller for caller, callee in calls if callee == "bank.py:Ledger.post"} == {
        "bank.py:by_name",
        "bank.py:by_string",
        "bank.py:by_union",
        "bank.py:by_optional",
        "bank.py:by_re_export",
        "bank.py:by_return_annotation",
    }
