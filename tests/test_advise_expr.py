"""The rule expression language: parsing, printing, type checking and evaluation.

Property tests generate expressions and evidence at random: printing and re-parsing is the
identity, evaluation agrees with a reference computed alongside the generated tree, no input
text can make the parser raise anything but its own ParseError, and a name only ever evaluates
to what the evidence holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfgate.advise.expr import (
    FUNCTIONS,
    KEYWORDS,
    MAX_DEPTH,
    RESERVED,
    Binary,
    Boolean,
    Call,
    CheckError,
    Expr,
    Member,
    Name,
    Number,
    ParseError,
    Text,
    Unary,
    Undefined,
    check,
    evaluate,
    guarded_names,
    names,
    parse,
    to_source,
)

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass(frozen=True)
class Spec:
    kind: str


NUMBER_NAMES = ("n0", "n1", "n2", "n3")
BOOL_NAMES = ("b0", "b1")
TEXT_NAMES = ("t0", "t1")
CATALOGUE = {
    **{name: Spec("number") for name in NUMBER_NAMES},
    **{name: Spec("bool") for name in BOOL_NAMES},
    **{name: Spec("text") for name in TEXT_NAMES},
}
UNDEF = object()
"""The reference's "no value": the implementation must answer ``Undefined`` there."""

NAME = st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True).filter(
    lambda n: n not in KEYWORDS and n not in RESERVED
)


# --- round trip: print(tree) parses back to tree ----------------------------------------------

LITERAL = st.one_of(
    st.floats(min_value=0, allow_nan=False, allow_infinity=False).map(lambda v: Number(abs(v))),
    st.text(max_size=12).map(Text),
    st.booleans().map(Boolean),
)
OPTION = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(Number),
    st.text(max_size=8).map(Text),
    st.booleans().map(Boolean),
)
OPERATORS = ("+", "-", "*", "/", "<", "<=", ">", ">=", "==", "!=", "and", "or")


def _extend(children: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
    return st.one_of(
        st.tuples(st.sampled_from(["-", "not"]), children).map(lambda t: Unary(t[0], t[1])),  # type: ignore[arg-type]
        st.tuples(st.sampled_from(OPERATORS), children, children).map(lambda t: Binary(*t)),
        st.tuples(children, st.lists(OPTION, min_size=1, max_size=3)).map(
            lambda t: Member(t[0], tuple(t[1]))
        ),
        st.tuples(st.sampled_from(sorted(FUNCTIONS)), st.lists(children, max_size=3)).map(
            lambda t: Call(t[0], tuple(t[1]))
        ),
    )


TREE = st.recursive(st.one_of(LITERAL, NAME.map(Name)), _extend, max_leaves=14)


@FAST
@given(TREE)
@pytest.mark.slow
def test_printing_then_parsing_gives_the_same_tree(tree: Expr) -> None:
    assert parse(to_source(tree)) == tree


def test_printing_parenthesises_what_precedence_would_change() -> None:
    tree = Binary("*", Binary("+", Name("a"), Name("b")), Unary("-", Name("c")))
    assert to_source(tree) == "(a + b) * (-c)"
    assert parse("a + b * -c") == Binary(
        "+", Name("a"), Binary("*", Name("b"), Unary("-", Name("c")))
    )
    assert parse("not a and b or c") == Binary(
        "or", Binary("and", Unary("not", Name("a")), Name("b")), Name("c")
    )
    assert parse("a - b - c") == Binary("-", Binary("-", Name("a"), Name("b")), Name("c"))


# --- evaluation against a reference -------------------------------------------------------------

EVIDENCE = st.fixed_dictionaries(
    {
        **{n: st.none() | st.integers(-50, 50) | st.floats(-50, 50) for n in NUMBER_NAMES},
        **{n: st.none() | st.booleans() for n in BOOL_NAMES},
        **{n: st.none() | st.sampled_from(["bf16", "fp32", ""]) for n in TEXT_NAMES},
    }
).map(lambda d: {k: v for k, v in d.items() if v is not None})


def _arith(op: str, a: Any, b: Any) -> Any:
    if a is UNDEF or b is UNDEF:
        return UNDEF
    if op == "/":
        return UNDEF if b == 0 else a / b
    return {"+": a + b, "-": a - b, "*": a * b}[op]


@st.composite
def number_tree(draw: st.DrawFn, evidence: dict[str, Any], depth: int) -> tuple[Expr, Any]:
    choice = draw(st.integers(0, 1 if depth == 0 else 5))
    if choice == 0:
        value = draw(st.integers(-20, 20))
        return (Number(float(value)) if value >= 0 else Unary("-", Number(float(-value)))), float(
            value
        )
    if choice == 1:
        name = draw(st.sampled_from(NUMBER_NAMES))
        return Name(name), evidence.get(name, UNDEF)
    left, a = draw(number_tree(evidence, depth - 1))
    if choice == 2:
        return Unary("-", left), UNDEF if a is UNDEF else -a
    right, b = draw(number_tree(evidence, depth - 1))
    if choice in (3, 4):
        op = draw(st.sampled_from(["+", "-", "*", "/"]))
        return Binary(op, left, right), _arith(op, a, b)
    function = draw(st.sampled_from(["min", "max", "abs", "clamp"]))
    if function == "abs":
        return Call("abs", (left,)), UNDEF if a is UNDEF else abs(a)
    if function == "clamp":
        high, c = draw(number_tree(evidence, depth - 1))
        if UNDEF in (a, b, c):
            return Call("clamp", (left, right, high)), UNDEF
        value = UNDEF if b > c else min(max(a, b), c)  # type: ignore[assignment]
        return Call("clamp", (left, right, high)), value
    pick = min if function == "min" else max
    return Call(function, (left, right)), UNDEF if UNDEF in (a, b) else pick(a, b)


@st.composite
def bool_tree(draw: st.DrawFn, evidence: dict[str, Any], depth: int) -> tuple[Expr, Any]:
    choice = draw(st.integers(0, 3 if depth == 0 else 8))
    if choice == 0:
        value = draw(st.booleans())
        return Boolean(value), value
    if choice == 1:
        name = draw(st.sampled_from(BOOL_NAMES))
        return Name(name), evidence.get(name, UNDEF)
    if choice == 2:
        name = draw(st.sampled_from(NUMBER_NAMES + BOOL_NAMES + TEXT_NAMES))
        return Call("present", (Name(name),)), name in evidence
    if choice == 3:
        name = draw(st.sampled_from(TEXT_NAMES))
        literal = draw(st.sampled_from(["bf16", "fp32", "fp16"]))
        op = draw(st.sampled_from(["==", "!="]))
        value = evidence.get(name, UNDEF)
        reference = UNDEF if value is UNDEF else (value == literal) == (op == "==")
        return Binary(op, Name(name), Text(literal)), reference
    if choice in (4, 5):
        left, a = draw(number_tree(evidence, depth - 1))
        right, b = draw(number_tree(evidence, depth - 1))
        op = draw(st.sampled_from(["<", "<=", ">", ">=", "==", "!="]))
        if a is UNDEF or b is UNDEF:
            return Binary(op, left, right), UNDEF
        compare = {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}
        return Binary(op, left, right), compare[op]
    if choice == 6:
        inner, a = draw(bool_tree(evidence, depth - 1))
        return Unary("not", inner), UNDEF if a is UNDEF else not a
    if choice == 7:
        item, a = draw(number_tree(evidence, depth - 1))
        options = draw(st.lists(st.integers(-5, 5), min_size=1, max_size=4))
        tree = Member(item, tuple(Number(float(o)) for o in options))
        return tree, UNDEF if a is UNDEF else a in options
    left, a = draw(bool_tree(evidence, depth - 1))
    right, b = draw(bool_tree(evidence, depth - 1))
    op = draw(st.sampled_from(["and", "or"]))
    if a is UNDEF:
        return Binary(op, left, right), UNDEF
    if a == (op == "or"):  # short circuit: the right side is never looked at
        return Binary(op, left, right), a
    return Binary(op, left, right), b


def _same(value: object, reference: object) -> bool:
    if reference is UNDEF:
        return isinstance(value, Undefined)
    if isinstance(value, bool) or isinstance(reference, bool):
        return value is reference
    return isinstance(value, int | float) and value == reference


@FAST
@given(st.data())
def test_evaluation_matches_a_reference_computation(data: st.DataObject) -> None:
    evidence = data.draw(EVIDENCE)
    kind = data.draw(st.sampled_from(["number", "bool"]))
    make = number_tree if kind == "number" else bool_tree
    tree, reference = data.draw(make(evidence, 4))
    reparsed = parse(to_source(tree))  # through the parser: precedence must not change meaning
    assert check(reparsed, CATALOGUE) == kind
    value = evaluate(reparsed, evidence)
    assert _same(value, reference), (to_source(tree), evidence, value, reference)


# --- robustness -----------------------------------------------------------------------------------

TOKENS = [
    "a", "n0", "b0", "t0", "1", "2.5", "1e-3", '"x"', "true", "false", "and", "or", "not", "in",
    "+", "-", "*", "/", "<", "<=", ">", ">=", "==", "!=", "(", ")", "[", "]", ",", ".", "min",
    "max", "abs", "clamp", "present", "is_multiple", "__import__", "lambda", "'", '"', "=", "@",
    "A", "é", "1e999", "\\",
]  # fmt: skip


def _robust(text: str) -> None:
    try:
        tree = parse(text)
    except ParseError as exc:
        assert 1 <= exc.column <= len(text) + 1
        return
    try:
        check(tree, CATALOGUE)
    except CheckError as exc:
        assert exc.column >= 1
    result = evaluate(tree, {"n0": 0, "b0": True, "t0": "x", "a": 1.5})
    assert isinstance(result, bool | int | float | str | Undefined)


@FAST
@given(st.text(max_size=60))
def test_arbitrary_text_raises_nothing_but_parse_error(text: str) -> None:
    _robust(text)


@FAST
@given(st.lists(st.sampled_from(TOKENS), max_size=20), st.sampled_from(["", " "]))
def test_token_soup_raises_nothing_but_parse_error(tokens: list[str], separator: str) -> None:
    _robust(separator.join(tokens))


@pytest.mark.parametrize(
    "text",
    ["(" * 2000 + "1" + ")" * 2000, "1" + " + 1" * 3000, "-" * 3000 + "1", "not " * 3000 + "true"],
    ids=["parens", "long-sum", "minus", "not"],
)
def test_deep_nesting_is_a_parse_error_not_a_recursion_error(text: str) -> None:
    with pytest.raises(ParseError, match="nests"):
        parse(text)


def test_nesting_up_to_the_limit_parses() -> None:
    depth = MAX_DEPTH - 1
    assert parse("(" * depth + "1" + ")" * depth) == Number(1.0)


# --- names read the evidence and nothing else ------------------------------------------------


@FAST
@given(NAME, st.dictionaries(NAME, st.integers() | st.booleans() | st.text(max_size=5)))
def test_a_name_evaluates_to_its_evidence_value_or_to_nothing(
    name: str, evidence: dict[str, Any]
) -> None:
    value = evaluate(parse(name), evidence)
    if name in evidence:
        assert value == evidence[name] and type(value) is type(evidence[name])
    else:
        assert isinstance(value, Undefined)


@pytest.mark.parametrize(
    "name", ["eval", "open", "os", "sys", "__builtins__", "__class__", "evidence", "self", "print"]
)
def test_python_names_are_not_reachable(name: str) -> None:
    assert evaluate(parse(name), {}) == Undefined(f"no evidence {name}")


def test_present_guards_an_absent_name_by_short_circuit() -> None:
    tree = parse("not present(n0) or n0 > 3")
    assert evaluate(tree, {}) is True
    assert evaluate(tree, {"n0": 5}) is True
    assert evaluate(tree, {"n0": 1}) is False
    assert evaluate(parse("n0 > 3 or true"), {}) == Undefined("no evidence n0")
    assert guarded_names(tree) == {"n0"} and names(tree) == {"n0"}


@pytest.mark.parametrize(
    "text", ["n0 / 0", "n0 / (n1 - n1)", "is_multiple(n0, 0)", "1 / n0 > 2", "clamp(1, 3, 2)"]
)
def test_division_by_zero_and_crossed_bounds_are_undefined(text: str) -> None:
    assert isinstance(evaluate(parse(text), {"n0": 0, "n1": 4}), Undefined)


def test_functions() -> None:
    evidence = {"n0": 4096, "n1": 50257, "n2": -2.5}
    assert evaluate(parse("is_multiple(n0, 8) and not is_multiple(n1, 8)"), evidence) is True
    assert evaluate(parse("clamp(n2, 0, 1) + abs(n2) + min(n0, 3, 9) + max(1, 2)"), evidence) == 7.5
    assert evaluate(parse('t0 in ["bf16", "fp16"]'), {"t0": "fp16"}) is True
    assert evaluate(parse("n0 in [-1, 2]"), {"n0": -1}) is True
    assert evaluate(parse("1e-3 * 1000 == 1"), {}) is True


def test_mistyped_evidence_makes_the_expression_undefined_not_a_crash() -> None:
    assert isinstance(evaluate(parse("n0 + 1"), {"n0": True}), Undefined)
    assert isinstance(evaluate(parse("b0 and true"), {"b0": 1}), Undefined)
    assert isinstance(evaluate(parse("n0 == 1"), {"n0": "1"}), Undefined)
    assert isinstance(evaluate(parse("n0 * n0 - n0 * n0"), {"n0": math.inf}), Undefined)


# --- errors carry a column -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "column", "message"),
    [
        ("a < b < c", 7, "do not chain"),
        ("a == b != c", 8, "do not chain"),
        ("a in [1] in [2]", 10, "do not chain"),
        ("x + cfg.value", 8, "attribute access"),
        ("xs[0] > 1", 3, "subscripts"),
        ('__import__("os")', 1, "unknown function '__import__'"),
        ("n0 + exec(1)", 6, "unknown function 'exec'"),
        ("lambda: 1", 1, "'lambda' is not part"),
        ('t0 == "bf16', 7, "unterminated string"),
        ("t0 == 'bf16'", 7, "double quotes"),
        ("n0 > 1 n1", 8, "after the end"),
        ("n0 > 1)", 7, "after the end"),
        ("(n0 > 1", 8, "closing the '('"),
        ("n0 >", 5, "expected a value"),
        ("n0 = 1", 4, "compare with =="),
        ("True", 1, "lower case"),
        ("n0 in [n1]", 8, "literals only"),
        ("n0 in []", 8, "literals only"),
        ("n0 % 2", 4, "unexpected '%'"),
        ("(n0)(1)", 5, "only the whitelisted functions"),
        ("1e999 > n0", 1, "too large"),
        ('"a\\n"', 3, "unknown escape"),
    ],
)
def test_parse_errors_name_the_column(text: str, column: int, message: str) -> None:
    with pytest.raises(ParseError) as caught:
        parse(text)
    assert caught.value.column == column
    assert message in caught.value.message


@pytest.mark.parametrize(
    ("text", "column", "message"),
    [
        ("n0 > unknown_metric", 6, "unknown evidence 'unknown_metric'"),
        ("b0 + 1", 1, "'+' needs a number, this is a bool"),
        ('t0 > "a"', 1, "'>' needs a number, this is a text"),
        ("t0 == 1", 4, "compares a text with a number"),
        ("n0 and b0", 1, "'and' needs a bool"),
        ("not n0", 5, "'not' needs a bool"),
        ("-b0", 2, "'-' needs a number"),
        ('n0 in [1, "a"]', 11, "other kinds"),
        ("clamp(n0, 1)", 1, "clamp() takes 3 arguments, got 2"),
        ("min(n0)", 1, "min() takes at least 2 arguments"),
        ("abs()", 1, "abs() takes 1 argument, got 0"),
        ("present(n0 + 1)", 12, "present() takes an evidence name"),
        ("present(nope)", 9, "unknown evidence 'nope'"),
        ("is_multiple(n0, b0)", 17, "is_multiple() needs a number"),
    ],
)
def test_check_errors_name_the_column(text: str, column: int, message: str) -> None:
    with pytest.raises(CheckError) as caught:
        check(parse(text), CATALOGUE)
    assert caught.value.column == column
    assert message in caught.value.message


def test_check_gives_the_kind() -> None:
    assert check(parse("n0 * 2 + abs(n1)"), CATALOGUE) == "number"
    assert check(parse('t0 == "bf16" and present(n0)'), CATALOGUE) == "bool"
    assert check(parse("t0"), CATALOGUE) == "text"
    assert names(parse("min(n0, n1) > 1 and present(b0)")) == {"n0", "n1", "b0"}
