"""Make `hide_solutions: true` also remove *gated* solutions (for `make book-student`).

sphinx-exercise 1.2.1 drops a ``{solution}`` directive when ``hide_solutions`` is set, but
for the gated form used in notebooks (``{solution-start}`` ... code cells ...
``{solution-end}``) it drops only the start marker: the solution's cells stay visible and
the orphaned end marker crashes the HTML writer. Here the start marker leaves a placeholder
node, and a transform that runs just before sphinx-exercise merges gated solutions removes
everything from the placeholder to the matching end marker.
"""

from docutils import nodes
from sphinx.transforms import SphinxTransform
from sphinx_exercise.directive import SolutionStartDirective
from sphinx_exercise.nodes import solution_end_node


class hidden_solution_start(nodes.Element):  # noqa: N801 (docutils node naming)
    """Where a hidden gated solution began; removed before writing."""


class StudentSolutionStartDirective(SolutionStartDirective):
    def run(self):
        shown = super().run()  # also records the marker for sphinx-exercise's checks
        if self.env.app.config.hide_solutions:
            return [hidden_solution_start()]
        return shown


class RemoveHiddenGatedSolutions(SphinxTransform):
    default_priority = 5  # before sphinx-exercise's MergeGatedSolutions (10)

    def apply(self):
        for start in list(self.document.findall(hidden_solution_start)):
            siblings = start.parent.children
            first = siblings.index(start)
            ends = [
                i for i in range(first, len(siblings)) if isinstance(siblings[i], solution_end_node)
            ]
            last = ends[0] if ends else None
            if last is None:  # unmatched: sphinx-exercise's own check reports it
                start.parent.remove(start)
                continue
            del siblings[first : last + 1]


def setup(app):
    app.setup_extension("sphinx_exercise")
    app.add_node(hidden_solution_start)
    app.add_directive("solution-start", StudentSolutionStartDirective, override=True)
    app.add_transform(RemoveHiddenGatedSolutions)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
