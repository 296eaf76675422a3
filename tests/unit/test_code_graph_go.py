"""The Go code graph: package-aware ``calls`` and ``tested_by`` edges over a multi-package module
(``tests/fixtures/code_graph/go``), plus small snapshots for single rules."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
from code_graph_support import Pair, load, pairs

from context_ledger.sources.code_graph import build_code_graph
from context_ledger.sources.model import Document, EdgeRelation, SymbolEdge

FIXTURE = Path(__file__).parents[1] / "fixtures" / "code_graph" / "go"

REFUNDS = "refunds/refunds.go"
BATCH = "refunds/batch.go"
LEDGER = "ledger/ledger.go"
TESTS = "refunds/refunds_test.go"
EXAMPLES = "refunds/example_test.go"


def calls_of(documents: list[Document]) -> set[Pair]:
    return pairs(build_code_graph(documents), EdgeRelation.CALLS)


def go(files: dict[str, str]) -> list[Document]:
    return [Document(path=path, content=content) for path, content in files.items()]


@pytest.fixture(scope="module")
def edges() -> list[SymbolEdge]:
    return build_code_graph(load(FIXTURE))


def test_calls_are_exactly_the_resolvable_ones(edges: list[SymbolEdge]) -> None:
    assert pairs(edges, EdgeRelation.CALLS) == {
        (f"{LEDGER}:Ledger.Post", f"{LEDGER}:validate"),
        (f"{BATCH}:Batch.Close", f"{BATCH}:Batch.Flush"),
        (f"{BATCH}:Batch.Flush", f"{REFUNDS}:Refunds.Authorise"),
        (f"{BATCH}:Batch.PendingAmount", f"{BATCH}:sumBy"),
        (f"{BATCH}:FlushAll", f"{BATCH}:Batch.Flush"),
        (f"{BATCH}:FlushEach", f"{BATCH}:Batch.Flush"),
        (f"{BATCH}:Total", f"{BATCH}:sumBy"),
        (f"{EXAMPLES}:ExampleRefunds_Authorise", f"{LEDGER}:New"),
        (f"{EXAMPLES}:ExampleRefunds_Authorise", f"{REFUNDS}:NewRefunds"),
        (f"{EXAMPLES}:ExampleRefunds_Authorise", f"{REFUNDS}:Refunds.Authorise"),
        (f"{REFUNDS}:Refunds.Authorise", f"{REFUNDS}:Refunds.issue"),
        (f"{REFUNDS}:Refunds.Authorise", f"{REFUNDS}:Refunds.withinLimit"),
        (f"{REFUNDS}:Refunds.Authorise", f"{REFUNDS}:validate"),
        (f"{REFUNDS}:Refunds.issue", f"{LEDGER}:Ledger.Post"),
        (f"{REFUNDS}:Refunds.issue", f"{REFUNDS}:reference"),
        (f"{REFUNDS}:Refunds.withinLimit", f"{BATCH}:Limits.Allows"),
        (f"{REFUNDS}:reference", f"{REFUNDS}:digits"),
        (f"{TESTS}:BenchmarkTotal", f"{BATCH}:Total"),
        (f"{TESTS}:TestAuthorise", f"{REFUNDS}:Refunds.Authorise"),
        (f"{TESTS}:TestAuthorise", f"{TESTS}:newTestRefunds"),
        (f"{TESTS}:TestAuthoriseLimits", f"{TESTS}:assertApproved"),
        (f"{TESTS}:TestRefunds_withinLimit", f"{TESTS}:assertApproved"),
        (f"{TESTS}:assertApproved", f"{REFUNDS}:Refunds.Authorise"),
        (f"{TESTS}:assertApproved", f"{TESTS}:newTestRefunds"),
        (f"{TESTS}:newTestRefunds", f"{LEDGER}:New"),
        (f"{TESTS}:newTestRefunds", f"{REFUNDS}:NewRefunds"),
    }


def test_tested_by_links_what_tests_call_through_helpers_and_name(
    edges: list[SymbolEdge],
) -> None:
    tests_through_helpers = {
        f"{TESTS}:TestAuthorise",
        f"{TESTS}:TestAuthoriseLimits",
        f"{TESTS}:TestRefunds_withinLimit",
        f"{EXAMPLES}:ExampleRefunds_Authorise",
    }
    assert pairs(edges, EdgeRelation.TESTED_BY) == {
        *(
            (tested, test)
            for test in tests_through_helpers
            for tested in (
                f"{LEDGER}:New",
                f"{REFUNDS}:NewRefunds",
                f"{REFUNDS}:Refunds.Authorise",
            )
        ),
        (f"{BATCH}:Total", f"{TESTS}:BenchmarkTotal"),
        # Named, not called: TestRefunds_withinLimit only goes through Authorise.
        (f"{REFUNDS}:Refunds.withinLimit", f"{TESTS}:TestRefunds_withinLimit"),
    }


def test_only_calls_and_tested_by_are_stored_and_called_by_is_calls_read_backwards(
    edges: list[SymbolEdge],
) -> None:
    called_by: defaultdict[str, set[str]] = defaultdict(set)
    for caller, callee in pairs(edges, EdgeRelation.CALLS):
        called_by[callee].add(caller)

    assert {e.relation for e in edges} == {EdgeRelation.CALLS, EdgeRelation.TESTED_BY}
    assert called_by[f"{REFUNDS}:Refunds.Authorise"] == {
        f"{BATCH}:Batch.Flush",
        f"{EXAMPLES}:ExampleRefunds_Authorise",
        f"{TESTS}:TestAuthorise",
        f"{TESTS}:assertApproved",
    }


def test_edges_are_deduplicated_and_sorted(edges: list[SymbolEdge]) -> None:
    assert len(set(edges)) == len(edges)
    assert edges == sorted(
        edges, key=lambda e: (e.relation, e.from_path, e.from_symbol, e.to_path, e.to_symbol)
    )


def test_a_method_call_on_a_field_resolves_through_the_struct_field_type(
    edges: list[SymbolEdge],
) -> None:
    calls = pairs(edges, EdgeRelation.CALLS)

    assert (f"{REFUNDS}:Refunds.issue", f"{LEDGER}:Ledger.Post") in calls
    assert (f"{REFUNDS}:Refunds.withinLimit", f"{BATCH}:Limits.Allows") in calls


def test_an_unknown_receiver_links_the_only_method_of_that_name(edges: list[SymbolEdge]) -> None:
    assert (f"{BATCH}:FlushEach", f"{BATCH}:Batch.Flush") in pairs(edges, EdgeRelation.CALLS)


def test_an_unknown_receiver_with_several_methods_of_that_name_is_skipped(
    edges: list[SymbolEdge],
) -> None:
    assert not any(e.from_symbol == "CloseAll" for e in edges)


def test_same_named_functions_of_different_packages_never_link(edges: list[SymbolEdge]) -> None:
    validators = {
        caller: callee
        for caller, callee in pairs(edges, EdgeRelation.CALLS)
        if callee.endswith(":validate")
    }

    assert validators == {
        f"{LEDGER}:Ledger.Post": f"{LEDGER}:validate",
        f"{REFUNDS}:Refunds.Authorise": f"{REFUNDS}:validate",
    }


def test_recursion_makes_no_self_edge(edges: list[SymbolEdge]) -> None:
    assert not any(e.from_symbol == e.to_symbol == "digits" for e in edges)


def test_calls_inside_function_literals_count_for_the_enclosing_declaration(
    edges: list[SymbolEdge],
) -> None:
    assert (f"{TESTS}:TestAuthoriseLimits", f"{TESTS}:assertApproved") in pairs(
        edges, EdgeRelation.CALLS
    )


def test_a_module_at_the_snapshot_root_resolves_its_root_package() -> None:
    documents = go(
        {
            "go.mod": "module example.com/tool\n",
            "tool.go": "package tool\n\nfunc Version() {}\n",
            "cmd/tool/main.go": """package main

import (
	"example.com/tool"
	"example.com/tool/cli"
)

func main() { cli.Run(); tool.Version() }
""",
            "cli/cli.go": """package cli

import "example.com/tool"

func Run() { tool.Version() }
""",
        }
    )

    assert calls_of(documents) == {
        ("cmd/tool/main.go:main", "cli/cli.go:Run"),
        ("cmd/tool/main.go:main", "tool.go:Version"),
        ("cli/cli.go:Run", "tool.go:Version"),
    }


def test_without_go_mod_imports_resolve_by_directory_suffix() -> None:
    documents = [doc for doc in load(FIXTURE) if doc.path != "go.mod"]

    assert (f"{REFUNDS}:Refunds.issue", f"{LEDGER}:Ledger.Post") in calls_of(documents)
    assert calls_of(documents) == calls_of(load(FIXTURE))


def test_an_import_outside_the_go_mod_module_is_a_dependency_even_if_a_directory_matches() -> None:
    documents = go(
        {
            "go.mod": "module example.com/app\n",
            "app/app.go": """package app

import "example.com/other/ledger"

func Book() { ledger.New() }
""",
            "ledger/ledger.go": "package ledger\n\nfunc New() {}\n",
        }
    )

    assert calls_of(documents) == set()


def test_a_method_on_a_type_outside_the_snapshot_is_never_guessed() -> None:
    documents = go(
        {
            "store/store.go": """package store

import (
	"sync"
	sqlite "github.com/mattn/go-sqlite3"
	"github.com/acme/db"
)

type Store struct{ mu sync.Mutex }

func (s *Store) Lock()  {}
func (s *Store) Open()  {}
func (s *Store) Close() {}

func Save(s *Store) {
	var mu sync.Mutex
	mu.Lock()
	s.mu.Lock()
	sqlite.Open()
	db.Open()
	s.Close()
}
""",
        }
    )

    assert calls_of(documents) == {("store/store.go:Save", "store/store.go:Store.Close")}


def test_a_method_promoted_from_an_embedded_type_resolves_despite_same_named_methods() -> None:
    documents = go(
        {
            "svc/svc.go": """package svc

type Base struct{}

func (Base) Close() {}

type Other struct{}

func (o *Other) Close() {}

type Service struct {
	*Base
	name string
}

func Shutdown() {
	s := &Service{}
	s.Close()
}
""",
        }
    )

    assert calls_of(documents) == {("svc/svc.go:Shutdown", "svc/svc.go:Base.Close")}


def test_constructor_results_conversions_and_multi_value_results_type_their_variables() -> None:
    documents = go(
        {
            "pay/pay.go": """package pay

type Card struct{}

func (c *Card) Charge() {}

type Wallet struct{}

func (w Wallet) Charge() {}

func NewCard() (*Card, error) { return &Card{}, nil }

func Pay(raw any) {
	card, err := NewCard()
	_ = err
	card.Charge()
	w := Wallet(struct{}{})
	w.Charge()
	p := new(Card)
	p.Charge()
}
""",
        }
    )

    assert calls_of(documents) == {
        ("pay/pay.go:Pay", "pay/pay.go:NewCard"),
        ("pay/pay.go:Pay", "pay/pay.go:Card.Charge"),
        ("pay/pay.go:Pay", "pay/pay.go:Wallet.Charge"),
    }


def test_methods_of_generic_types_are_named_without_type_parameters() -> None:
    documents = go(
        {
            "kv/kv.go": """package kv

type Pair[K comparable, V any] struct{ key K }

func (p *Pair[K, V]) Key() K { return p.key }

func (p *Pair[K, V]) String() string { p.Key(); return "" }

func First[K comparable, V any](pairs []Pair[K, V]) K {
	p := Pair[K, V]{}
	return p.Key()
}
""",
        }
    )

    assert calls_of(documents) == {
        ("kv/kv.go:Pair.String", "kv/kv.go:Pair.Key"),
        ("kv/kv.go:First", "kv/kv.go:Pair.Key"),
    }


def test_every_build_variant_of_a_function_is_linked() -> None:
    documents = go(
        {
            "fs/open_linux.go": "package fs\n\nfunc open() {}\n",
            "fs/open_windows.go": "package fs\n\nfunc open() {}\n",
            "fs/fs.go": "package fs\n\nfunc Open() { open() }\n",
        }
    )

    assert calls_of(documents) == {
        ("fs/fs.go:Open", "fs/open_linux.go:open"),
        ("fs/fs.go:Open", "fs/open_windows.go:open"),
    }


def test_helpers_are_followed_two_deep_but_not_three() -> None:
    documents = go(
        {
            "calc/calc.go": """package calc

func One() {}
func Two() {}
func Three() {}
""",
            "calc/calc_test.go": """package calc

import "testing"

func first(t *testing.T)  { One(); second(t) }
func second(t *testing.T) { Two(); third(t) }
func third(t *testing.T)  { Three() }

func TestChain(t *testing.T) { first(t) }
""",
        }
    )

    tested = {tested for tested, _ in pairs(build_code_graph(documents), EdgeRelation.TESTED_BY)}

    assert tested == {"calc/calc.go:One", "calc/calc.go:Two"}


def test_only_go_test_signatures_are_tests() -> None:
    documents = go(
        {
            "calc/calc.go": "package calc\n\nfunc Sum() {}\n",
            "calc/calc_test.go": """package calc

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) { Sum(); os.Exit(m.Run()) }
func Testable(t *testing.T) { Sum() }
func TestSumHelper(x int)   { Sum() }
func FuzzSum(f *testing.F)  { Sum() }
""",
        }
    )

    tests = {test for _, test in pairs(build_code_graph(documents), EdgeRelation.TESTED_BY)}

    assert tests == {"calc/calc_test.go:FuzzSum"}


def test_test_helpers_are_invisible_to_production_code() -> None:
    documents = go(
        {
            "calc/calc.go": "package calc\n\nfunc Sum() { reset() }\n\nfunc reset() {}\n",
            "calc/helpers_test.go": "package calc\n\nfunc reset() {}\n",
        }
    )

    assert calls_of(documents) == {("calc/calc.go:Sum", "calc/calc.go:reset")}


def test_files_the_go_tool_ignores_are_not_read() -> None:
    documents = go(
        {
            "calc/calc.go": "package calc\n\nfunc Sum() { add() }\n\nfunc add() {}\n",
            "calc/testdata/calc.go": "package calc\n\nfunc add() {}\n",
            "calc/_old/calc.go": "package calc\n\nfunc add() {}\n",
        }
    )

    assert calls_of(documents) == {("calc/calc.go:Sum", "calc/calc.go:add")}
