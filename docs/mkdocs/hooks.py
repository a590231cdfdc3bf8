"""MkDocs hook of the documentation site: the figures the notebook draws, served from where it draws them.

The home page shows the headline figure, ``figures/paper_speedup.png``; the walkthrough notebook
writes it to ``notebooks/figures/`` (where the README shows it from). A copy under docs/ would
be a second file to keep equal to the first; this hook puts the notebook's own files into the
site instead, so the page can only show what the notebook last drew.
"""

from pathlib import Path

FIGURES = ("paper_speedup.png", "validation.png")
"""The notebook's figures the site serves, as ``figures/NAME``."""


def on_files(files, config):
    from mkdocs.structure.files import File

    notebooks = Path(config["config_file_path"]).resolve().parents[2] / "notebooks"
    for name in FIGURES:
        files.append(File(f"figures/{name}", str(notebooks), config["site_dir"], config["use_directory_urls"]))
    return files
