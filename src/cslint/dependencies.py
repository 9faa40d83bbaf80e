"""Which files a file's findings depend on, from what the run's name resolution read.

The project index records, for each module, the modules its names resolved through
(`ProjectIndex.reads`: the re-exports on the way, the modules defining what was found)
and, among them, those defining the class or function found (`symbol_reads`). A module E
depends on every module it reads, transitively: reach(E). A module M defining a class or
function that E uses may also take facts from E (E's traced code calls M's functions, E
subclasses M's class): M's findings depend on all E depends on. So

    depends(A) = reach(A) | depends(E) for every E that uses a class or function of A

A module read through no name (`reads[None]`: the official API's own bases, found in
the project when it is torch or cerebras.pytorch itself) is read by every module.

Sets are Python integers used as bit sets over the modules' positions: the whole of
torch (2,300 modules) takes milliseconds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from cslint.semantic.module_index import ModuleIndex


def depends_on(modules: Sequence[ModuleIndex],
               reads: dict[int | None, dict[int, ModuleIndex]],
               symbol_reads: dict[int | None, dict[int, ModuleIndex]]) -> list[int]:
    """For each of `modules`, the bit set (over positions in `modules`) of the modules its
    findings depend on. Reads of modules not in `modules` are left out."""
    # reach: over every read, each component after the components it reaches.
    edges = _graph(modules, reads)
    components, component_of = _strongly_connected(edges)
    reach_of: list[int] = [0] * len(components)
    for number, members in enumerate(components):
        bits = 0
        for member in members:
            bits |= 1 << member
            for target in edges[member]:
                if component_of[target] != number:
                    bits |= reach_of[component_of[target]]
        reach_of[number] = bits
    reach = [reach_of[component_of[index]] for index in range(len(modules))]

    # depends: from the users down to what they use, over the symbol reads.
    uses = _graph(modules, symbol_reads)
    components, component_of = _strongly_connected(uses)
    depends_of: list[int] = []
    for members in components:
        bits = 0
        for member in members:
            bits |= reach[member]
        depends_of.append(bits)
    for number in range(len(components) - 1, -1, -1):
        for member in components[number]:
            for target in uses[member]:
                if component_of[target] != number:
                    depends_of[component_of[target]] |= depends_of[number]
    return [depends_of[component_of[index]] for index in range(len(modules))]


def _strongly_connected(edges: list[list[int]]) -> tuple[list[list[int]], list[int]]:
    """Tarjan's strongly connected components, iteratively (a chain of thousands of
    modules must not exhaust the stack): the components, each listed after every
    component it reaches, and each node's component number."""
    count = len(edges)
    index_of = [-1] * count
    low = [0] * count
    on_stack = [False] * count
    stack: list[int] = []
    component_of = [-1] * count
    components: list[list[int]] = []
    counter = 0
    for root in range(count):
        if index_of[root] != -1:
            continue
        work = [(root, 0)]
        while work:
            node, next_edge = work.pop()
            if next_edge == 0:
                index_of[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack[node] = True
            descended = False
            targets = edges[node]
            while next_edge < len(targets):
                target = targets[next_edge]
                next_edge += 1
                if index_of[target] == -1:
                    work.append((node, next_edge))
                    work.append((target, 0))
                    descended = True
                    break
                if on_stack[target]:
                    low[node] = min(low[node], index_of[target])
            if descended:
                continue
            if low[node] == index_of[node]:
                members = []
                while True:
                    member = stack.pop()
                    on_stack[member] = False
                    component_of[member] = len(components)
                    members.append(member)
                    if member == node:
                        break
                components.append(members)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return components, component_of


def users_of(modules: Sequence[ModuleIndex],
             symbol_reads: dict[int | None, dict[int, ModuleIndex]]) -> list[int]:
    """For each of `modules`, the bit set of the modules that use its classes or
    functions, directly or through classes and functions of others that do: the code
    that may run into its own (read with it when it is checked again)."""
    uses = _graph(modules, symbol_reads)
    components, component_of = _strongly_connected(uses)
    members_of = [sum(1 << member for member in members) for members in components]
    # Each component is listed after those it reaches: from the last (which no other
    # one uses) down, a component's users are known before the components it uses.
    users: list[int] = [0] * len(components)
    for number in range(len(components) - 1, -1, -1):
        for member in components[number]:
            for target in uses[member]:
                if component_of[target] != number:
                    users[component_of[target]] |= users[number] | members_of[number]
    # In a cycle, the other members use it too.
    return [(users[component_of[index]] | members_of[component_of[index]]) & ~(1 << index)
            for index in range(len(modules))]


def used_by(modules: Sequence[ModuleIndex],
            symbol_reads: dict[int | None, dict[int, ModuleIndex]],
            starts: list[int]) -> dict[int, int]:
    """For each of `starts` (positions in `modules`), the bit set of the modules whose
    classes or functions it uses, directly or through the classes and functions of those
    it uses: the code its own may run into."""
    uses = _graph(modules, symbol_reads)
    found = {}
    for start in starts:
        bits, stack = 0, [start]
        while stack:
            for target in uses[stack.pop()]:
                if not bits >> target & 1:
                    bits |= 1 << target
                    stack.append(target)
        found[start] = bits
    return found


def _graph(modules: Sequence[ModuleIndex],
           edges_by_origin: dict[int | None, dict[int, ModuleIndex]]) -> list[list[int]]:
    """For each module, the positions of the others it reads (or whose classes and
    functions it uses, given `symbol_reads`), those read through no name by all."""
    position = {id(module): index for index, module in enumerate(modules)}
    read_by_all = {position[key] for key in edges_by_origin.get(None, {}) if key in position}
    return [sorted(({position[key] for key in edges_by_origin.get(id(module), {})
                     if key in position} | read_by_all) - {index})
            for index, module in enumerate(modules)]
