"""What the analysers report, and how it becomes stored edges.

Each language analyser returns a :class:`CallGraph`; the ``tested_by`` edges are derived here the
same way for every language: a test tests what it calls, directly or through helpers in
test-support files (at most :data:`HELPER_DEPTH` helpers deep), plus what its name names.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from context_ledger.sources.model import EdgeRelation, SymbolEdge

HELPER_DEPTH = 2


@dataclass(frozen=True)
class Symbol:
    path: str
    name: str


@dataclass
class CallGraph:
    """One language's findings in a snapshot.

    ``fixtures`` are links a test framework makes without a call (pytest injecting a fixture by
    parameter name): they lead to helpers when deriving ``tested_by`` but are not ``calls``.
    ``named`` holds what a test names by convention (``TestRefunds_Authorise``).
    """

    calls: defaultdict[Symbol, set[Symbol]] = field(default_factory=lambda: defaultdict(set))
    tests: set[Symbol] = field(default_factory=set)
    support_paths: set[str] = field(default_factory=set)
    fixtures: defaultdict[Symbol, set[Symbol]] = field(default_factory=lambda: defaultdict(set))
    named: defaultdict[Symbol, set[Symbol]] = field(default_factory=lambda: defaultdict(set))

    def add_call(self, caller: Symbol, callee: Symbol) -> None:
        if caller != callee:
            self.calls[caller].add(callee)


def to_edges(graph: CallGraph) -> set[SymbolEdge]:
    edges = {
        _edge(caller, callee, EdgeRelation.CALLS)
        for caller, callees in graph.calls.items()
        for callee in callees
    }
    for test in graph.tests:
        for tested in _tested_by(graph, test):
            edges.add(_edge(tested, test, EdgeRelation.TESTED_BY))
    return edges


def _tested_by(graph: CallGraph, test: Symbol) -> set[Symbol]:
    tested = set(graph.named.get(test, ()))
    seen = {test}
    frontier = {test}
    for _ in range(HELPER_DEPTH + 1):
        helpers: set[Symbol] = set()
        for caller in frontier:
            for callee in graph.calls.get(caller, set()) | graph.fixtures.get(caller, set()):
                if callee.path not in graph.support_paths:
                    tested.add(callee)
                elif callee not in seen and callee not in graph.tests:
                    helpers.add(callee)
        seen |= helpers
        frontier = helpers
    return tested


def _edge(source: Symbol, target: Symbol, relation: EdgeRelation) -> SymbolEdge:
    return SymbolEdge(
        from_path=source.path,
        from_symbol=source.name,
        to_path=target.path,
        to_symbol=target.name,
        relation=relation,
    )
