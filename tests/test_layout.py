"""The package's shape: no import circle between its modules (lazy imports inside functions count too)."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "hogwild_dqn"


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """module -> the package's modules it imports anywhere in its code."""
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {_module(p) for p in paths}
    graph = {}
    for path in paths:
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            deps |= {n for n in names if n in modules}
        graph[_module(path)] = deps - {_module(path)}
    return graph


def find_circle(graph: dict[str, set[str]]) -> list[str] | None:
    state, stack = {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for d in sorted(graph[m]):
            if state.get(d) == "open":
                return stack[stack.index(d):] + [d]
            if d not in state and (found := visit(d)):
                return found
        state[m] = "done"
        stack.pop()
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def test_no_import_circle():
    graph = import_graph()
    assert "hogwild_dqn.rundir" in graph["hogwild_dqn.cluster.driver"]  # the graph sees real imports
    assert find_circle(graph) is None, " -> ".join(find_circle(graph))


def test_the_circle_finder_finds_one():
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_circle({"a": {"b"}, "b": set()}) is None


def test_the_trainer_never_imports_the_tools():
    graph = import_graph()
    library = [m for m in graph if not m.startswith("hogwild_dqn.tools")]
    assert "hogwild_dqn.tools.benchmark" in graph and "hogwild_dqn.train" in library
    assert not {m: sorted(d for d in graph[m] if d.startswith("hogwild_dqn.tools"))
                for m in library if any(d.startswith("hogwild_dqn.tools") for d in graph[m])}
