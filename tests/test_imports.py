"""The package's import graph, lazy imports inside functions included, has no cycle."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "abc_lightning"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    files = {module_name(f): f for f in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in files.items():
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):  # every import, at any depth
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "abc_lightning":
                subs = {f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in files}
                edges |= subs
                if len(subs) < len(node.names):  # names from the module itself, not submodules
                    edges.add(node.module)
            elif isinstance(node, ast.Import):
                edges |= {a.name for a in node.names if a.name in files}
        graph[name] = edges - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt, path + [nxt])):
                return cycle
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start, [start])):
            return cycle
    return None


def test_the_package_has_no_import_cycle():
    graph = import_graph()
    assert len(graph) > 30 and "abc_lightning.runs.checkpoints" in graph["abc_lightning.training.module"]
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


# The rooms, lowest first: a module may import from its own room and from rooms below it,
# never from one above (lazy imports inside functions count too).
ROOMS = ["version", "errors", "vocab", "markdown", "runs", "plotting", "tasks", "evaluation", "data", "model",
         "training", "scaffolding", "calibration", "callbacks", "api", "cli", "reproduce", "__main__", "__init__"]


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_no_room_imports_from_a_room_above_it():
    graph = import_graph()
    assert {room(m) for m in graph} == set(ROOMS), "a room was added or removed: place it in ROOMS"
    rank = {name: i for i, name in enumerate(ROOMS)}
    upward = sorted(f"{m} -> {d}" for m, deps in graph.items() for d in deps if rank[room(d)] > rank[room(m)])
    assert upward == []


def test_the_package_root_is_small_and_no_module_is_long():
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert 2 <= len(root) <= 12, root
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py") if (n := len(p.read_text().splitlines())) > 400}
    assert long == {}
