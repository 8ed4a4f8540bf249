"""The paper kit's files: ``methodology.md``, ``methodology.tex`` and ``references.bib`` beside a
run's results, rendered from the methods text of ``report.methodology``.

The text is sentences with two tokens, ``{cite:KEY}`` and ``{code:TEXT}``; here they become
Markdown (``[KEY]`` and a reference list), LaTeX (``\\cite{KEY}``, escaped text, ``\\sloppy`` so
image digests do not overflow) and HTML (``report.html``). The BibTeX entries come from
``lodevem/data/references.json`` (each with where its fields were taken from) and from the
kinds' own references; only the keys the text cites are written, lodevem's own always, with the
version and the commit that ran and, when CITATION.cff names one, the repository's address.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

from ..latency.paper import Reference, load_references
from ..results import PairResult
from ..safe_io.markup import markdown_text, unliteral
from ..store.files import write_atomic
from .files import latex_escape
from .manifest import ManifestLike
from .methodology import TOKEN, RunFacts, cited_keys, run_facts, sections
from .shared import shared_manifest, shared_rows

__all__ = ["BIB_NAME", "CITATION_FILE", "MD_NAME", "REFERENCES", "TEX_NAME", "bibtex", "methodology_latex",
           "methodology_markdown", "references", "render_html", "repository_url", "short_references",
           "write_paper_kit"]

MD_NAME = "methodology.md"
TEX_NAME = "methodology.tex"
BIB_NAME = "references.bib"
REFERENCES = Path(__file__).resolve().parent.parent / "data" / "references.json"


def render_html(text: str) -> str:
    """Token text as HTML: escaped, ``{cite:KEY}`` a link to the reference list, ``{code:X}`` code."""
    out, last = [], 0
    for match in TOKEN.finditer(text):
        out.append(html.escape(unliteral(text[last:match.start()])))
        kind, value = match.groups()
        out.append(f'<a href="#ref-{html.escape(value)}">[{html.escape(value)}]</a>' if kind == "cite"
                   else f"<code>{html.escape(unliteral(value))}</code>")
        last = match.end()
    out.append(html.escape(unliteral(text[last:])))
    return "".join(out)


def _render(text: str, latex: bool) -> str:
    """Token text as LaTeX or Markdown; a user's names in it are inert (``safe_io.markup.literal``:
    no token inside them) and escaped here like every plain text."""
    out, last = [], 0
    for match in TOKEN.finditer(text):
        plain = text[last:match.start()]
        out.append(latex_escape(unliteral(plain)) if latex else markdown_text(plain))
        kind, value = match.groups()
        if kind == "cite":
            out.append(f"\\cite{{{value}}}" if latex else f"[{value}]")
        else:
            out.append(f"\\texttt{{{latex_escape(unliteral(value))}}}" if latex else _code_span(unliteral(value)))
        last = match.end()
    tail = text[last:]
    out.append(latex_escape(unliteral(tail)) if latex else markdown_text(tail))
    rendered = "".join(out)
    return re.sub(r" +(?=\\cite)", "~", rendered) if latex else rendered


def _code_span(value: str) -> str:
    """A Markdown code span around ``value`` whatever backticks it holds."""
    fence = "`" * (max((len(run) for run in re.findall(r"`+", value)), default=0) + 1)
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def references(facts: RunFacts) -> dict[str, Reference]:
    """``references.json`` and the references the run's kinds bring of their own."""
    found = load_references(REFERENCES)
    for kind in facts.latency.kinds:
        found.update({ref.key: ref for ref in kind.paper.references})
    return found


CITATION_FILE = Path(__file__).resolve().parent.parent.parent / "CITATION.cff"


def repository_url() -> Optional[str]:
    """CITATION.cff's ``repository-code`` (the one place the project's URL is written), None when
    the file or the field is absent (an installed wheel has no CITATION.cff)."""
    try:
        text = CITATION_FILE.read_text(encoding="utf-8")
    except OSError:
        return None
    found = re.search(r"^repository-code:\s*[\"']?([^\s\"']+)", text, flags=re.M)
    return found.group(1) if found else None


def _fill(value: str, facts: RunFacts) -> Optional[str]:
    """A reference field with the run's facts filled in: ``{version}``, ``{commit}`` (the manifest's
    git commit, "not recorded" without one), package versions; None for a field naming ``{url}``
    when the repository URL is not known (the field is left out)."""
    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == "version":
            return facts.software.lodevem_version
        if name == "commit":
            return (facts.software.git_commit[:12] + (" with local changes" if facts.software.git_dirty else "")
                    if facts.software.git_commit else "not recorded")
        if name == "url":
            return repository_url() or ""
        return str(facts.software.packages.get(name) or "unrecorded")
    if "{url}" in value and repository_url() is None:
        return None
    return re.sub(r"\{(version|commit|url|torch|onnxruntime|torch-pruning|nn-meter)\}", one, value)


def _short_reference(entry: Reference, facts: RunFacts) -> str:
    fields = entry.fields
    author = str(fields.get("author", "")).strip("{}")
    first = author.split(" and ")[0].split(",")[0].strip("{}")
    who = f"{first} et al." if " and " in author else first
    where = _fill(fields.get("booktitle") or fields.get("howpublished", ""), facts) or ""
    where = where.replace("\\url{", "").rstrip("}")
    tail = ", ".join(str(p) for p in (where, fields.get("year")) if p)
    title = fields["title"].replace("{", "").replace("}", "").replace("\\&", "&")
    return _fill(f"{who}: {title}." + (f" {tail}." if tail else ""), facts) or ""


def short_references(facts: RunFacts) -> list[tuple[str, str]]:
    """(key, one-line reference) of every cited key, in first-cited order."""
    refs = references(facts)
    return [(key, _short_reference(refs[key], facts)) for key in cited_keys(facts)]


def methodology_markdown(facts: RunFacts) -> str:
    lines = [f"<!-- lodevem {facts.software.lodevem_version}: generated from this run's records; re-run, do not "
             "edit. -->",
             "# Methods", ""]
    for section in sections(facts):
        lines += [f"## {section.title}", ""]
        lines += [line for text in section.paragraphs for line in (_render(text, False), "")]
        lines += [f"- {_render(item, False)}" for item in section.items]
        lines += [line for text in section.after for line in ("", _render(text, False))]
        if section.items:
            lines.append("")
    lines += ["## References", ""]
    lines += [f"- [{key}] {text}" for key, text in short_references(facts)]
    lines.append(f"\nBibTeX: `{BIB_NAME}`.")
    return "\n".join(lines) + "\n"


def methodology_latex(facts: RunFacts) -> str:
    """Paragraphs for ``\\input{}`` into a paper's methods section; cites ``references.bib``."""
    lines = [f"% lodevem {facts.software.lodevem_version}: generated from this run's records; re-run, do not edit.",
             f"% \\input{{{TEX_NAME}}} inside your methods section; add \\bibliography{{references}} ({BIB_NAME}).",
             "% \\sloppy: image digests and file names are long unbreakable words", r"\begingroup\sloppy"]
    for section in sections(facts):
        head = f"\\paragraph{{{section.title}.}}"
        if section.paragraphs:
            lines += [f"{head} " + _render(section.paragraphs[0], True), ""]
            lines += [line for text in section.paragraphs[1:] for line in (_render(text, True), "")]
        else:
            lines.append(head)
        if section.items:
            lines += [r"\begin{itemize}", *(r"\item " + _render(item, True) for item in section.items),
                      r"\end{itemize}"]
        lines += [_render(text, True) for text in section.after]
    lines.append(r"\endgroup")
    return "\n".join(lines) + "\n"


def bibtex(facts: RunFacts) -> str:
    """The entries ``cited_keys`` names, fields as ``references.json`` gives them."""
    refs = references(facts)
    out = [f"% lodevem {facts.software.lodevem_version}: the references of this run's methodology.tex. Generated."]
    for key in cited_keys(facts):
        entry = refs[key]
        out.append(f"@{entry.entry_type}{{{key},")
        out += [f"  {name} = {{{filled}}}," for name, value in entry.fields.items()
                if (filled := _fill(str(value), facts)) is not None]
        out.append("}")
    return "\n".join(out) + "\n"


def write_paper_kit(rows: Sequence[PairResult], manifest: ManifestLike, out_dir: Path) -> list[Path]:
    """Write ``methodology.md``, ``methodology.tex`` and ``references.bib``; return their paths."""
    out_dir = Path(out_dir)
    facts = run_facts(shared_rows(rows, out_dir), shared_manifest(manifest, out_dir))  # no path of the machine
    written = []
    for name, text in ((MD_NAME, methodology_markdown(facts)), (TEX_NAME, methodology_latex(facts)),
                       (BIB_NAME, bibtex(facts))):
        write_atomic(out_dir / name, text)
        written.append(out_dir / name)
    return written
