"""Matplotlib's SVG document rewritten into an ``<svg>`` element that can share an HTML page.

Several charts live on one report page, so what matplotlib writes for a standalone file is
rewritten in steps (:func:`inline_svg`):

1. the metadata goes (its date would make the output differ run to run);
2. each data point of a marker artist gets a ``<title>`` (the hover text; no script needed);
3. the ids that something refers to (clip paths, marker definitions) are renamed
   ``{element_id}-d0``, ``-d1``… in document order and ours (``{element_id}-pt7``) prefixed the
   same way; matplotlib's unused ones (``axes_1``…) are dropped, and every ``url(#…)`` and
   ``href="#…"`` follows;
4. coordinates are rounded to 0.01 pt and path data compacted;
5. style attributes repeated on several elements become classes of one ``<style>`` scoped to
   ``#element_id`` (a ``<style>`` inside inline SVG applies to the whole page), with the font list
   said once;
6. the root gets ``id=element_id``, an ARIA label, and scales with the page (``viewBox`` kept,
   no fixed size); the tree is serialised by hand, so ``xml.etree.ElementTree``'s process-wide
   namespace registry is never touched.

On one page, no element id should be another one followed by ``-`` and more (``h`` and
``h-pt1``), as the prefixed ids could then meet.
"""

from __future__ import annotations

import itertools
import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

SVG_NS = "http://www.w3.org/2000/svg"
XLINK_NS = "http://www.w3.org/1999/xlink"
_SVG = "{" + SVG_NS + "}"
_XLINK_HREF = "{" + XLINK_NS + "}href"
_XML_NS = "{http://www.w3.org/XML/1998/namespace}"

_URL_REF_RE = re.compile(r"url\(#([^)\s]+)\)")
_LONG_FLOAT_RE = re.compile(r"-?\d+\.\d{3,}")
_PATH_SPACE_RE = re.compile(r" ?([A-Za-z]) ?")
_FONT_FAMILY_RE = re.compile(r"font-family: ?([^;]*)(?:;|$) ?")
_NO_ROTATION_RE = re.compile(r"rotate\(-?0 [^)]*\)")
# Characters XML 1.0 cannot carry at all: a label holding one would make the page unparsable.
_XML_INVALID_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
# Attributes whose numbers are coordinates: rounding them to 0.01 pt is invisible and saves ~20%.
_GEOMETRY_ATTRS = frozenset({"d", "x", "y", "x1", "x2", "y1", "y2", "width", "height", "transform"})
_TEXT_TAGS = frozenset({_SVG + "text", _SVG + "tspan", _SVG + "title", _SVG + "style"})
_PX_PER_PT = 4.0 / 3.0  # CSS px per pt: the chart's natural size on screen


def clean_text(text: object) -> str:
    """Text with the characters XML 1.0 cannot hold removed, so no label can break the page."""
    return _XML_INVALID_RE.sub("", str(text))


def inline_svg(
    data: bytes, *, element_id: str, titles: Mapping[str, Sequence[tuple[str, str]]], aria: str
) -> str:
    """Matplotlib's SVG document ``data`` as an ``<svg>`` element for a shared page.

    ``titles`` maps the gid of a marker artist to one ``(id, hover text)`` per drawn point, in
    drawing order.
    """
    root = ET.fromstring(data)
    for child in list(root):
        if child.tag == _SVG + "metadata":
            root.remove(child)
    ids = _IdRenamer(element_id, own=_attach_titles(root, titles), referenced=_referenced(root))
    sheet = _StyleSheet(element_id)
    parents = {child: el for el in root.iter() for child in el}
    for el in list(root.iter()):
        _strip_blank_text(el)
        if el.tag == _SVG + "style":
            sheet.take_rule((el.text or "").strip())
            parents[el].remove(el)
            continue
        for key, value in list(el.attrib.items()):
            _rewrite_attribute(el, key, value, ids, sheet)
    for el in list(root.iter(_SVG + "defs")):
        if len(el) == 0 and el in parents:
            parents[el].remove(el)
    root.insert(0, sheet.element())
    return _serialize_root(root, element_id, aria)


def _referenced(root: ET.Element) -> set[str]:
    """The ids some attribute refers to, by ``href="#id"`` or ``url(#id)``."""
    referenced: set[str] = set()
    for el in root.iter():
        for key, value in el.attrib.items():
            if key in (_XLINK_HREF, "href"):
                if value.startswith("#"):
                    referenced.add(value[1:])
            elif "url(#" in value:
                referenced.update(_URL_REF_RE.findall(value))
    return referenced


@dataclass
class _IdRenamer:
    """Page-unique ids: ours prefixed with the chart's id, matplotlib's numbered in document
    order (``{element_id}-d{n}``); our ids never are "d" and a number."""

    element_id: str
    own: set[str]
    referenced: set[str]
    renamed: dict[str, str] = field(default_factory=dict)
    serial: itertools.count[int] = field(default_factory=itertools.count)

    def keeps(self, old: str) -> bool:
        """Whether an element's id is needed: something refers to it, or it is ours."""
        return old in self.referenced or old in self.own

    def rename(self, old: str) -> str:
        new = self.renamed.get(old)
        if new is None:
            prefix = self.element_id + "-"
            new = prefix + old if old in self.own else f"{prefix}d{next(self.serial)}"
            self.renamed[old] = new
        return new

    def in_urls(self, value: str) -> str:
        """``value`` with every ``url(#id)`` renamed."""
        return _URL_REF_RE.sub(lambda m: f"url(#{self.rename(m.group(1))})", value)


@dataclass
class _StyleSheet:
    """The chart's one ``<style>``: matplotlib's rules scoped to the chart, the font list said
    once, and every style attribute repeated on two or more elements as a class."""

    element_id: str
    rules: list[str] = field(default_factory=list)
    styled: list[tuple[ET.Element, str]] = field(default_factory=list)
    font_family: str = ""

    def take_rule(self, rule: str) -> None:
        """Matplotlib's ``*{stroke-linejoin: round; ...}`` would restyle every SVG on the page."""
        scoped = rule.replace("*{", f"#{self.element_id} *{{")
        self.rules.append(scoped if rule.startswith("*") else rule)

    def take_style(self, el: ET.Element, value: str) -> None:
        """An element's ``style`` attribute, removed now and given back as a class or inline
        when the sheet is written."""
        if el.tag == _SVG + "text":
            found = _FONT_FAMILY_RE.search(value)
            if found and (not self.font_family or found.group(1) == self.font_family):
                self.font_family = found.group(1)
                value = _FONT_FAMILY_RE.sub("", value)
        compact = ";".join(
            ":".join(part.strip() for part in decl.split(":", 1))
            for decl in value.split(";")
            if decl.strip()
        )
        del el.attrib["style"]
        if compact:
            self.styled.append((el, compact))

    def element(self) -> ET.Element:
        """The ``<style>`` element, after each taken style went back to its element."""
        css = list(self.rules)
        if self.font_family:
            css.append(f"#{self.element_id} text{{font-family:{self.font_family}}}")
        counts: dict[str, int] = {}
        for _, style in self.styled:
            counts[style] = counts.get(style, 0) + 1
        classes: dict[str, str] = {}
        for el, style in self.styled:
            if counts[style] < 2:
                el.set("style", style)
                continue
            name = classes.get(style)
            if name is None:
                name = classes[style] = f"s{len(classes)}"
                css.append(f"#{self.element_id} .{name}{{{style}}}")
            el.set("class", name)
        sheet = ET.Element(_SVG + "style")
        sheet.text = "".join(css)
        return sheet


def _strip_blank_text(el: ET.Element) -> None:
    """Drop the indentation matplotlib writes; text inside text-bearing elements stays."""
    if el.text is not None and el.tag not in _TEXT_TAGS and not el.text.strip():
        el.text = None
    if el.tail is not None and el.tag != _SVG + "tspan" and not el.tail.strip():
        el.tail = None


def _rewrite_attribute(
    el: ET.Element, key: str, value: str, ids: _IdRenamer, sheet: _StyleSheet
) -> None:
    """One attribute made page-safe and compact (see the module's steps 3–5)."""
    attrib = el.attrib
    if key == "d":
        attrib[key] = _compact_path(value)
    elif key == "style":
        sheet.take_style(el, value)
    elif key == "transform" and _NO_ROTATION_RE.fullmatch(value):
        del attrib[key]
    elif key == "id":
        if ids.keeps(value):
            attrib[key] = ids.rename(value)
        else:
            del attrib[key]
    elif key in (_XLINK_HREF, "href"):
        if value.startswith("#"):
            attrib[key] = "#" + ids.rename(value[1:])
    elif "url(#" in value:
        attrib[key] = ids.in_urls(value)
    elif key in _GEOMETRY_ATTRS:
        attrib[key] = _LONG_FLOAT_RE.sub(_round_number, value)


def _attach_titles(root: ET.Element, titles: Mapping[str, Sequence[tuple[str, str]]]) -> set[str]:
    """Wrap each marker drawn by an artist whose gid is in ``titles`` in a ``<g id=...>`` that
    holds a ``<title>``, the one hover mechanism browsers support in a static SVG. Returns the
    ids made.

    Matplotlib writes such an artist as a group holding, per drawn point and in order, a
    ``<use>`` of a shared marker path (or an inline ``<path>``), maybe inside clip groups, and
    the marker definition inside ``<defs>``. If the count does not match the titles (a matplotlib
    change), that group gets none: a missing hover text is better than a wrong one.
    """
    made: set[str] = set()
    if not titles:
        return made
    groups = [el for el in root.iter(_SVG + "g") if el.get("id") in titles]
    for group in groups:
        gid = group.get("id", "")
        made.add(gid)
        slots: list[tuple[ET.Element, int]] = []
        _find_markers(group, slots)
        texts = titles[gid]
        if len(slots) != len(texts):
            continue
        for (parent, index), (point_id, text) in zip(slots, texts, strict=True):
            marker = parent[index]
            wrapper = ET.Element(_SVG + "g", {"id": point_id})
            wrapper.tail, marker.tail = marker.tail, None
            ET.SubElement(wrapper, _SVG + "title").text = clean_text(text)
            wrapper.append(marker)
            parent[index] = wrapper
            made.add(point_id)
    return made


def _find_markers(parent: ET.Element, slots: list[tuple[ET.Element, int]]) -> None:
    """``(parent, index)`` of every ``<use>`` or ``<path>`` under ``parent``, outside ``<defs>``."""
    for index, child in enumerate(parent):
        if child.tag in (_SVG + "use", _SVG + "path"):
            slots.append((parent, index))
        elif child.tag != _SVG + "defs":
            _find_markers(child, slots)


def _compact_path(d: str) -> str:
    """Path data with coordinates rounded to 0.01 pt and no blanks around the commands."""
    d = " ".join(_LONG_FLOAT_RE.sub(_round_number, d).split())
    return _PATH_SPACE_RE.sub(r"\1", d)


def _round_number(m: re.Match[str]) -> str:
    text = f"{float(m.group()):.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def _points(text: str) -> float:
    """A size in pt (``"504pt"``), or NaN when it is missing or not a finite number."""
    try:
        value = float(text.removesuffix("pt"))
    except ValueError:
        return math.nan
    return value if math.isfinite(value) else math.nan


def _serialize_root(root: ET.Element, element_id: str, aria: str) -> str:
    """The root as an ``<svg>`` element that scales with the page, with its children."""
    width_pt = _points(root.attrib.pop("width", ""))
    root.attrib.pop("height", None)
    root.attrib.pop("id", None)
    attrs = {
        "xmlns": SVG_NS,
        "xmlns:xlink": XLINK_NS,
        "id": element_id,
        "class": "perfgate-chart",
        "role": "img",
        "aria-label": clean_text(aria),
    }
    natural = f"width:{width_pt * _PX_PER_PT:.0f}px;" if math.isfinite(width_pt) else ""
    attrs["style"] = natural + "max-width:100%;height:auto"
    attrs.update({_attr_name(k): v for k, v in root.attrib.items() if _attr_name(k)})
    out: list[str] = ["<svg"]
    out.extend(f' {key}="{_escape_attr(value)}"' for key, value in attrs.items())
    out.append(">")
    for child in root:
        _serialize(child, out)
    out.append("</svg>")
    return "".join(out)


def _attr_name(key: str) -> str:
    """The serialised name of an attribute; empty for one in a namespace we do not write."""
    if not key.startswith("{"):
        return key
    if key.startswith("{" + XLINK_NS + "}"):
        return "xlink:" + key[len(XLINK_NS) + 2 :]
    if key.startswith(_XML_NS):
        return "xml:" + key[len(_XML_NS) :]
    return ""


def _serialize(el: ET.Element, out: list[str]) -> None:
    """Append ``el`` as SVG markup with the SVG namespace as the default one."""
    if not el.tag.startswith(_SVG):
        return  # foreign markup (none is expected): dropped rather than mis-prefixed
    tag = el.tag[len(_SVG) :]
    if tag == "g" and not el.attrib:
        # A group without attributes does nothing: matplotlib nests many once ids are gone.
        for child in el:
            _serialize(child, out)
        if el.tail:
            out.append(_escape_text(el.tail))
        return
    out.append("<" + tag)
    for key, value in el.attrib.items():
        name = _attr_name(key)
        if name:
            out.append(f' {name}="{_escape_attr(value)}"')
    if len(el) == 0 and not el.text:
        out.append("/>")
    else:
        out.append(">")
        if el.text:
            out.append(_escape_text(el.text))
        for child in el:
            _serialize(child, out)
        out.append(f"</{tag}>")
    if el.tail:
        out.append(_escape_text(el.tail))


def _escape_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _escape_attr(text: str) -> str:
    return (
        _escape_text(text)
        .replace('"', "&quot;")
        .replace("\n", "&#10;")
        .replace("\r", "&#13;")
        .replace("\t", "&#9;")
    )
