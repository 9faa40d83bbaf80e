"""Which files a file's findings depend on, from what the run's name resolution read.

The project index records, for each module, the modules its names resolved into (its
bases, its callees, the re-exports on the way: `ProjectIndex.reads`). A module E whose
analysis reads module M may put facts into M (its traced code calls M's functions) and
takes facts from M (its bases, its callees' results). So the findings of a file A depend
on everything any module reaching A reads, A included:

    depends(A) = union of reach(E) over every E with A in reach(E)

where reach(E) is E and all it reads, transitively. A module read through no name
(`reads[None]`: the official API's own bases, found in the project when it is torch or
cerebras.pytorch itself) is read by every module.

Sets are Python integers used as bit sets over the modules' positions: the whole of
torch (2,300 modules) takes milliseconds.
"""

from __future__ import annotations

from typing import Sequence

from cslint.semantic.module_index import ModuleIndex


def depends_on(modules: Sequence[ModuleIndex],
               reads: dict[int | None, dict[int, ModuleIndex]]) -> list[int]:
    """For each of `modules`, the bit set (over positions in `modules`) of the modules its
    findings depend on. Reads of modules not in `modules` are left out."""
    position = {id(module): index for index, module in enumerate(modules)}
    read_by_all = {position[key] for key in reads.get(None, {}) if key in position}
    edges: list[list[int]] = [
        sorted(({position[key] for key in reads.get(id(module), {}) if key in position}
                | read_by_all) - {index})
        for index, module in enumerate(modules)]
    components, component_of = _strongly_connected(edges)
    # Tarjan's algorithm lists each component after every component it reaches.
    reach: list[int] = [0] * len(components)
    for number, members in enumerate(components):
        bits = 0
        for member in members:
            bits |= 1 << member
            for target in edges[member]:
                if component_of[target] != number:
                    bits |= reach[component_of[target]]
        reach[number] = bits
    # depends(C) = reach(C) | depends(every component that reads C): from the readers down.
    depends = list(reach)
    for number in range(len(components) - 1, -1, -1):
        for member in components[number]:
            for target in edges[member]:
                if component_of[target] != number:
                    depends[component_of[target]] |= depends[number]
    return [depends[component_of[index]] for index in range(len(modules))]

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
