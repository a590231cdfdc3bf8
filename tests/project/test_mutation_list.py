"""The hand-written mutants of ``tests/tools/mutate_step.py`` still apply to the sources.

A mutant whose source text has moved is reported NOT-APPLIED and tests nothing; this
keeps the list in step with the code it breaks (running the mutants is ``python
tests/tools/mutate_step.py``, about 10 s each, not part of the suite)."""

from pathlib import Path

import pytest

from mutate_step import MUTANTS, ROOT


@pytest.mark.parametrize("label,path,old,new,what", MUTANTS, ids=[m[0] for m in MUTANTS])
def test_each_mutant_names_one_place_in_its_file(label, path, old, new, what):
    assert old != new
    assert Path(ROOT, path).read_text().count(old) == 1, f"{label}: {what}"
