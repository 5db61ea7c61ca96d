"""Write the student edition's table of contents: the book's, without the teacher's guide.

Usage: python scripts/student_toc.py _toc.yml OUT.yml
"""

import sys

import yaml

TEACHER_ONLY = {"book/teachers_guide"}


def drop_teacher_pages(node):
    """The TOC tree with every entry whose file is teacher-only removed."""
    if isinstance(node, list):
        return [drop_teacher_pages(n) for n in node if not _teacher_only(n)]
    if isinstance(node, dict):
        return {key: drop_teacher_pages(value) for key, value in node.items()}
    return node


def _teacher_only(entry) -> bool:
    return isinstance(entry, dict) and entry.get("file") in TEACHER_ONLY


def main(source: str, out: str) -> None:
    with open(source) as f:
        toc = yaml.safe_load(f)
    student = drop_teacher_pages(toc)
    if student == toc:
        raise SystemExit(f"{source} lists none of {sorted(TEACHER_ONLY)}: nothing to hide")
    with open(out, "w") as f:
        yaml.safe_dump(student, f, sort_keys=False)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: python scripts/student_toc.py _toc.yml OUT.yml")
    main(sys.argv[1], sys.argv[2])
