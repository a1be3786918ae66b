"""The rule expression language: a tiny, safe, typed language over evidence values.

Rule files hold conditions (``matmul_share > 0.2 and not autocast_enabled``) and formulas
(``matmul_share * fp32_matmul_fraction``) written by people who are not reviewed like code, so
they are never handed to Python's ``eval``: a hand-written tokenizer and recursive-descent parser
build a small AST of frozen dataclasses, ``check`` types it against the evidence catalogue before
a rule is accepted, and ``evaluate`` walks it over one evidence mapping.

Grammar, loosest binding first (``a < b < c`` is rejected: comparisons do not chain)::

    expression := or
    or         := and ("or" and)*
    and        := not ("and" not)*
    not        := "not" not | comparison
    comparison := sum [("<" | "<=" | ">" | ">=" | "==" | "!=") sum | "in" list]
    sum        := product (("+" | "-") product)*
    product    := unary (("*" | "/") unary)*
    unary      := "-" unary | primary
    primary    := NUMBER | STRING | "true" | "false" | NAME | FUNCTION "(" args ")"
                | "(" expression ")"
    list       := "[" literal ("," literal)* [","] "]"

Numbers are decimal (``1``, ``0.5``, ``1e-3``); strings use double quotes with ``\\"`` and
``\\\\`` as the only escapes; names are ``[a-z_][a-z0-9_]*``. Functions: ``min``, ``max``
(two or more numbers), ``abs``, ``clamp(x, lo, hi)``, ``is_multiple(x, k)`` and
``present(name)``, true when the evidence holds that metric.

A name absent from the evidence, a division by zero or a result that is not a number makes the
expression *undefined* (``Undefined``, with the reason): the rule using it does not fire. ``and``
and ``or`` short-circuit, so ``not present(x) or x > 3`` is defined without ``x``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

Kind = Literal["number", "bool", "text"]
Value = bool | int | float | str
"""What evidence holds and what an expression yields (``int`` counts as a number)."""

MAX_DEPTH = 48
"""Deepest nesting accepted: rule expressions are shallow, and a bound keeps every recursive
walk (check, evaluate, printing) far from Python's recursion limit whatever the input."""

FUNCTIONS: dict[str, tuple[int, int | None]] = {
    "abs": (1, 1),
    "clamp": (3, 3),
    "is_multiple": (2, 2),
    "max": (2, None),
    "min": (2, None),
    "present": (1, 1),
}
"""Whitelisted function → (fewest, most) arguments; ``None``: no upper bound."""

KEYWORDS = frozenset({"and", "or", "not", "in", "true", "false"})
RESERVED = frozenset(
    {
        "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif",
        "else", "except", "finally", "for", "from", "global", "if", "import", "is", "lambda",
        "none", "nonlocal", "null", "pass", "raise", "return", "try", "while", "with", "yield",
    }
)  # fmt: skip
"""Words that look like Python: refused with a message instead of read as evidence names."""
COMPARISONS = ("<=", ">=", "==", "!=", "<", ">")


class ExprError(Exception):
    """A problem in an expression, at a 1-based column of its text (lint turns it into
    file:line:col)."""

    def __init__(self, message: str, column: int) -> None:
        self.message = message
        self.column = column
        super().__init__(f"column {column}: {message}")


class ParseError(ExprError):
    """The text is not an expression of the language."""


class CheckError(ExprError):
    """The expression parses but is wrong: an unknown name, a type error, a bad arity."""


class EvidenceKindSpec(Protocol):
    """What the checker needs from a catalogue entry (``perfgate.advise.catalogue``)."""

    @property
    def kind(self) -> str:
        """``number``, ``bool`` or ``text``."""
        ...


# --- AST ----------------------------------------------------------------------------------
# ``column`` is where the node starts (operators: where the operator is) and takes no part in
# equality, so a printed-and-reparsed tree equals the original.


@dataclass(frozen=True)
class Number:
    """A number literal (non-negative: ``-1`` is ``Unary`` minus, except in lists)."""

    value: float
    column: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Text:
    """A double-quoted string literal."""

    value: str
    column: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Boolean:
    """``true`` or ``false``."""

    value: bool
    column: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Name:
    """An evidence name."""

    name: str
    column: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Unary:
    """``-x`` or ``not x``."""

    op: Literal["-", "not"]
    operand: Expr
    column: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Binary:
    """Arithmetic (``+ - * /``), comparison (``< <= > >= == !=``) or logic (``and or``)."""

    op: str
    left: Expr
    right: Expr
    column: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Member:
    """``item in [options]``: the options are literals, never expressions."""

    item: Expr
    options: tuple[Number | Text | Boolean, ...]
    column: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Call:
    """A call of a whitelisted function."""

    function: str
    args: tuple[Expr, ...]
    column: int = field(default=0, compare=False)


Expr = Number | Text | Boolean | Name | Unary | Binary | Member | Call
_ARITHMETIC = ("+", "-", "*", "/")
_KINDS: dict[str, Kind] = {"number": "number", "bool": "bool", "text": "text"}
_LOGIC = ("and", "or")


# --- tokens -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Token:
    kind: Literal["number", "string", "name", "keyword", "op", "end"]
    text: str
    column: int
    value: float | str = ""


_OPERATORS = ("<=", ">=", "==", "!=", "<", ">", "+", "-", "*", "/", "(", ")", "[", "]", ",", ".")


def _tokenize(text: str) -> Iterator[_Token]:
    """Tokens on demand, so the parser reports the first problem from the left."""
    previous: _Token | None = None
    at = 0
    while at < len(text):
        char = text[at]
        column = at + 1
        if char in " \t\r\n":
            at += 1
        elif _digit_at(text, at) or _starts_fraction(text, at, previous):
            end = _number_end(text, at)
            number = float(text[at:end])
            if not math.isfinite(number):
                raise ParseError(f"number {text[at:end]} is too large", column)
            previous = _Token("number", text[at:end], column, number)
            yield previous
            at = end
        elif char == '"':
            value, at = _string(text, at)
            previous = _Token("string", text[column - 1 : at], column, value)
            yield previous
        elif "a" <= char <= "z" or char == "_":
            end = at
            while end < len(text) and (
                text[end] == "_" or "a" <= text[end] <= "z" or _digit_at(text, end)
            ):
                end += 1
            word = text[at:end]
            previous = _Token("keyword" if word in KEYWORDS else "name", word, column)
            yield previous
            at = end
        else:
            op = next((o for o in _OPERATORS if text.startswith(o, at)), None)
            if op is None:
                raise ParseError(_unexpected_character(char), column)
            previous = _Token("op", op, column)
            yield previous
            at += len(op)
    yield _Token("end", "", len(text) + 1)


def _starts_fraction(text: str, at: int, previous: _Token | None) -> bool:
    """``.5`` is a number, but ``a.5`` or ``f(x).5`` is an attribute access to refuse."""
    after_value = previous is not None and (previous.kind == "name" or previous.text in (")", "]"))
    return text[at] == "." and _digit_at(text, at + 1) and not after_value


def _digit_at(text: str, at: int) -> bool:
    return at < len(text) and text[at].isascii() and text[at].isdigit()


def _number_end(text: str, at: int) -> int:
    end = at
    while _digit_at(text, end):
        end += 1
    if end < len(text) and text[end] == ".":
        end += 1
        while _digit_at(text, end):
            end += 1
    if end < len(text) and text[end] in "eE":
        exponent = end + 1
        if exponent < len(text) and text[exponent] in "+-":
            exponent += 1
        if _digit_at(text, exponent):
            end = exponent
            while _digit_at(text, end):
                end += 1
    return end


def _string(text: str, start: int) -> tuple[str, int]:
    """The value of the string literal opening at ``start``, and the index after it."""
    chars: list[str] = []
    at = start + 1
    while at < len(text):
        char = text[at]
        if char == '"':
            return "".join(chars), at + 1
        if char == "\\":
            escaped = text[at + 1 : at + 2]
            if escaped not in ('"', "\\"):
                raise ParseError('unknown escape in a string: only \\" and \\\\ exist', at + 1)
            chars.append(escaped)
            at += 2
        else:
            chars.append(char)
            at += 1
    raise ParseError("unterminated string: a closing double quote is missing", start + 1)


def _unexpected_character(char: str) -> str:
    if char == "'":
        return "strings use double quotes, not single quotes"
    if char.isascii() and char.isupper():
        return f"unexpected {char!r}: names are lower case (and booleans are true/false)"
    if char == "=":
        return "'=' assigns nothing here: compare with =="
    if char in "%@&|^~!:;{}#$`?\\":
        return f"unexpected {char!r}: the language has + - * / < <= > >= == != and or not in"
    return f"unexpected character {char!r}"


# --- parser -------------------------------------------------------------------------------


def parse(text: str) -> Expr:
    """The AST of ``text``; ``ParseError`` (with the column) when it is not an expression."""
    parser = _Parser(_tokenize(text))
    tree = parser.expression()
    token = parser.peek()
    if token.kind != "end":
        raise ParseError(
            f"unexpected {_describe(token)} after the end of the expression", token.column
        )
    deepest = _deepest(tree)
    if deepest > MAX_DEPTH:
        raise ParseError(f"expression nests {deepest} levels deep (at most {MAX_DEPTH})", 1)
    return tree


class _Parser:
    """Precedence climbing over the token list; one method per grammar level."""

    def __init__(self, tokens: Iterator[_Token]) -> None:
        self.tokens = tokens
        self.current: _Token | None = None
        """The next token, read only when looked at: errors come in left-to-right order."""
        self.nesting = 0

    def peek(self) -> _Token:
        if self.current is None:
            self.current = next(self.tokens)
        return self.current

    def take(self) -> _Token:
        token = self.peek()
        if token.kind != "end":
            self.current = None
        return token

    def accept(self, text: str) -> _Token | None:
        token = self.peek()
        if token.kind in ("op", "keyword") and token.text == text:
            return self.take()
        return None

    def expect(self, text: str, what: str) -> _Token:
        token = self.accept(text)
        if token is None:
            found = self.peek()
            raise ParseError(f"expected {what}, found {_describe(found)}", found.column)
        return token

    def nested(self, column: int) -> None:
        self.nesting += 1
        if self.nesting > MAX_DEPTH:
            raise ParseError(f"expression nests deeper than {MAX_DEPTH} levels", column)

    def expression(self) -> Expr:
        left = self.conjunction()
        while token := self.accept("or"):
            left = Binary("or", left, self.conjunction(), token.column)
        return left

    def conjunction(self) -> Expr:
        left = self.negation()
        while token := self.accept("and"):
            left = Binary("and", left, self.negation(), token.column)
        return left

    def negation(self) -> Expr:
        token = self.accept("not")
        if token is None:
            return self.comparison()
        self.nested(token.column)
        operand = self.negation()
        self.nesting -= 1
        return Unary("not", operand, token.column)

    def comparison(self) -> Expr:
        left = self.sum()
        token = self.peek()
        if token.kind == "op" and token.text in COMPARISONS:
            self.take()
            result: Expr = Binary(token.text, left, self.sum(), token.column)
        elif token.kind == "keyword" and token.text == "in":
            self.take()
            result = Member(left, self.literal_list(), token.column)
        else:
            return left
        after = self.peek()
        if (after.kind == "op" and after.text in COMPARISONS) or (
            after.kind == "keyword" and after.text == "in"
        ):
            raise ParseError(
                f"comparisons do not chain: write 'a {token.text} b and b {after.text} c'",
                after.column,
            )
        return result

    def sum(self) -> Expr:
        left = self.product()
        while (token := self.accept("+")) or (token := self.accept("-")):
            left = Binary(token.text, left, self.product(), token.column)
        return left

    def product(self) -> Expr:
        left = self.unary()
        while (token := self.accept("*")) or (token := self.accept("/")):
            left = Binary(token.text, left, self.unary(), token.column)
        return left

    def unary(self) -> Expr:
        token = self.accept("-")
        if token is None:
            return self.postfix(self.primary())
        self.nested(token.column)
        operand = self.unary()
        self.nesting -= 1
        return Unary("-", operand, token.column)

    def postfix(self, node: Expr) -> Expr:
        token = self.peek()
        if token.kind == "op" and token.text == ".":
            raise ParseError("attribute access (.) is not part of the rule language", token.column)
        if token.kind == "op" and token.text == "[":
            raise ParseError("subscripts ([...]) are not part of the rule language", token.column)
        if token.kind == "op" and token.text == "(":
            raise ParseError("only the whitelisted functions can be called", token.column)
        return node

    def primary(self) -> Expr:
        token = self.take()
        if token.kind == "number":
            return Number(float(token.value), token.column)
        if token.kind == "string":
            return Text(str(token.value), token.column)
        if token.kind == "keyword" and token.text in ("true", "false"):
            return Boolean(token.text == "true", token.column)
        if token.kind == "name":
            return self.name_or_call(token)
        if token.kind == "op" and token.text == "(":
            self.nested(token.column)
            inner = self.expression()
            self.expect(")", "')' closing the '(' at column " + str(token.column))
            self.nesting -= 1
            return inner
        raise ParseError(f"expected a value, found {_describe(token)}", token.column)

    def name_or_call(self, token: _Token) -> Expr:
        if token.text in RESERVED:
            raise ParseError(f"{token.text!r} is not part of the rule language", token.column)
        if not (self.peek().kind == "op" and self.peek().text == "("):
            return Name(token.text, token.column)
        if token.text not in FUNCTIONS:
            allowed = ", ".join(sorted(FUNCTIONS))
            raise ParseError(
                f"unknown function {token.text!r} (the functions are {allowed})", token.column
            )
        opening = self.take()
        self.nested(opening.column)
        args: list[Expr] = []
        if not self.accept(")"):
            args.append(self.expression())
            while self.accept(","):
                args.append(self.expression())
            self.expect(")", f"',' or ')' in the call of {token.text}")
        self.nesting -= 1
        return Call(token.text, tuple(args), token.column)

    def literal_list(self) -> tuple[Number | Text | Boolean, ...]:
        opening = self.expect("[", "'[' starting the list after 'in'")
        options = [self.literal()]
        while self.accept(","):
            if self.accept("]"):
                return tuple(options)
            options.append(self.literal())
        self.expect("]", f"',' or ']' closing the list opened at column {opening.column}")
        return tuple(options)

    def literal(self) -> Number | Text | Boolean:
        token = self.take()
        if token.kind == "op" and token.text == "-" and self.peek().kind == "number":
            return Number(-float(self.take().value), token.column)
        if token.kind == "number":
            return Number(float(token.value), token.column)
        if token.kind == "string":
            return Text(str(token.value), token.column)
        if token.kind == "keyword" and token.text in ("true", "false"):
            return Boolean(token.text == "true", token.column)
        raise ParseError(
            f"a list after 'in' holds literals only, found {_describe(token)}", token.column
        )


def _describe(token: _Token) -> str:
    if token.kind == "end":
        return "the end of the expression"
    return f"{token.kind} {token.text!r}" if token.kind != "op" else repr(token.text)


def children(node: Expr) -> tuple[Expr, ...]:
    """The direct sub-expressions of ``node`` (list options included)."""
    if isinstance(node, Unary):
        return (node.operand,)
    if isinstance(node, Binary):
        return (node.left, node.right)
    if isinstance(node, Member):
        return (node.item, *node.options)
    if isinstance(node, Call):
        return node.args
    return ()


def walk(node: Expr) -> Iterator[Expr]:
    """Every node of the tree, parents before children (iterative: any depth is safe)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(children(current)))


def _deepest(tree: Expr) -> int:
    deepest = 0
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children(node))
    return deepest


def names(tree: Expr) -> frozenset[str]:
    """Every evidence name the expression reads, ``present(x)`` arguments included."""
    return frozenset(node.name for node in walk(tree) if isinstance(node, Name))


def guarded_names(tree: Expr) -> frozenset[str]:
    """Names the expression tests with ``present(...)``: the ones it expects may be absent."""
    return frozenset(
        node.args[0].name
        for node in walk(tree)
        if isinstance(node, Call)
        and node.function == "present"
        and len(node.args) == 1
        and isinstance(node.args[0], Name)
    )


# --- printing -----------------------------------------------------------------------------


def to_source(tree: Expr) -> str:
    """Text that parses back to ``tree``: compound operands are parenthesised."""
    if isinstance(tree, Number):
        return repr(float(tree.value))
    if isinstance(tree, Text):
        return '"' + tree.value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(tree, Boolean):
        return "true" if tree.value else "false"
    if isinstance(tree, Name):
        return tree.name
    if isinstance(tree, Unary):
        return f"{tree.op}{' ' if tree.op == 'not' else ''}{_operand(tree.operand)}"
    if isinstance(tree, Binary):
        return f"{_operand(tree.left)} {tree.op} {_operand(tree.right)}"
    if isinstance(tree, Member):
        options = ", ".join(to_source(option) for option in tree.options)
        return f"{_operand(tree.item)} in [{options}]"
    return f"{tree.function}({', '.join(to_source(arg) for arg in tree.args)})"


def _operand(node: Expr) -> str:
    text = to_source(node)
    atomic = isinstance(node, Text | Boolean | Name | Call | Number) and not text.startswith("-")
    return text if atomic else f"({text})"


# --- type checking ------------------------------------------------------------------------


def check(tree: Expr, catalogue: Mapping[str, EvidenceKindSpec]) -> Kind:
    """The kind ``tree`` yields; ``CheckError`` for unknown names, type errors and arities."""
    if isinstance(tree, Number):
        return "number"
    if isinstance(tree, Text):
        return "text"
    if isinstance(tree, Boolean):
        return "bool"
    if isinstance(tree, Name):
        spec = catalogue.get(tree.name)
        if spec is None:
            raise CheckError(f"unknown evidence {tree.name!r}", tree.column)
        kind = _KINDS.get(spec.kind)
        if kind is None:
            raise CheckError(f"evidence {tree.name!r} has unknown kind {spec.kind!r}", tree.column)
        return kind
    if isinstance(tree, Unary):
        wanted: Kind = "number" if tree.op == "-" else "bool"
        _expect(tree.operand, catalogue, wanted, f"'{tree.op}'")
        return wanted
    if isinstance(tree, Binary):
        return _check_binary(tree, catalogue)
    if isinstance(tree, Member):
        kind = check(tree.item, catalogue)
        for option in tree.options:
            if check(option, catalogue) != kind:
                raise CheckError(
                    f"'in' compares a {kind} with a list holding other kinds", option.column
                )
        return "bool"
    return _check_call(tree, catalogue)


def _check_binary(tree: Binary, catalogue: Mapping[str, EvidenceKindSpec]) -> Kind:
    if tree.op in _ARITHMETIC:
        _expect(tree.left, catalogue, "number", f"'{tree.op}'")
        _expect(tree.right, catalogue, "number", f"'{tree.op}'")
        return "number"
    if tree.op in _LOGIC:
        _expect(tree.left, catalogue, "bool", f"'{tree.op}'")
        _expect(tree.right, catalogue, "bool", f"'{tree.op}'")
        return "bool"
    if tree.op in ("==", "!="):
        left, right = check(tree.left, catalogue), check(tree.right, catalogue)
        if left != right:
            raise CheckError(f"'{tree.op}' compares a {left} with a {right}", tree.column)
        return "bool"
    _expect(tree.left, catalogue, "number", f"'{tree.op}'")
    _expect(tree.right, catalogue, "number", f"'{tree.op}'")
    return "bool"


def _check_call(tree: Call, catalogue: Mapping[str, EvidenceKindSpec]) -> Kind:
    fewest, most = FUNCTIONS[tree.function]
    count = len(tree.args)
    if count < fewest or (most is not None and count > most):
        wanted = str(fewest) if fewest == most else f"at least {fewest}"
        raise CheckError(
            f"{tree.function}() takes {wanted} argument{'s' if most != 1 else ''}, got {count}",
            tree.column,
        )
    if tree.function == "present":
        (arg,) = tree.args
        if not isinstance(arg, Name):
            raise CheckError("present() takes an evidence name", arg.column)
        check(arg, catalogue)
        return "bool"
    for arg in tree.args:
        _expect(arg, catalogue, "number", f"{tree.function}()")
    return "bool" if tree.function == "is_multiple" else "number"


def _expect(
    node: Expr, catalogue: Mapping[str, EvidenceKindSpec], wanted: Kind, where: str
) -> None:
    kind = check(node, catalogue)
    if kind != wanted:
        raise CheckError(f"{where} needs a {wanted}, this is a {kind}", node.column)


# --- evaluation ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Undefined:
    """An expression with no value for this evidence; the rule using it does not fire."""

    reason: str


class _NoValue(Exception):
    """Raised inside ``evaluate`` and turned into ``Undefined`` at the top."""


def evaluate(tree: Expr, evidence: Mapping[str, Value]) -> Value | Undefined:
    """The value of ``tree`` over ``evidence``; ``Undefined`` with the reason when a name is
    absent, a division by zero happens, a result is not a number or values have the wrong
    type. Never raises for a tree ``parse`` produced."""
    try:
        return _value(tree, evidence)
    except _NoValue as exc:
        return Undefined(str(exc))


def _value(tree: Expr, evidence: Mapping[str, Value]) -> Value:
    if isinstance(tree, Number | Text | Boolean):
        return tree.value
    if isinstance(tree, Name):
        value = evidence.get(tree.name)
        if value is None:
            raise _NoValue(f"no evidence {tree.name}")
        return value
    if isinstance(tree, Unary):
        if tree.op == "-":
            return _finite(-_number(_value(tree.operand, evidence), "-"))
        return not _bool(_value(tree.operand, evidence), "not")
    if isinstance(tree, Binary):
        return _binary(tree, evidence)
    if isinstance(tree, Member):
        item = _value(tree.item, evidence)
        return any(_equal(item, option.value) for option in tree.options)
    return _call(tree, evidence)


def _binary(tree: Binary, evidence: Mapping[str, Value]) -> Value:
    if tree.op in _LOGIC:
        left_truth = _bool(_value(tree.left, evidence), tree.op)
        if left_truth == (tree.op == "or"):
            return left_truth
        return _bool(_value(tree.right, evidence), tree.op)
    left, right = _value(tree.left, evidence), _value(tree.right, evidence)
    if tree.op == "==":
        return _equal(left, right)
    if tree.op == "!=":
        return not _equal(left, right)
    a, b = _number(left, tree.op), _number(right, tree.op)
    if tree.op == "+":
        return _finite(a + b)
    if tree.op == "-":
        return _finite(a - b)
    if tree.op == "*":
        return _finite(a * b)
    if tree.op == "/":
        if b == 0:
            raise _NoValue("division by zero")
        return _finite(a / b)
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[tree.op]


def _call(tree: Call, evidence: Mapping[str, Value]) -> Value:
    if tree.function == "present":
        arg = tree.args[0] if tree.args else None
        if not isinstance(arg, Name) or len(tree.args) != 1:
            raise _NoValue("present() takes one evidence name")
        return evidence.get(arg.name) is not None
    args = [_number(_value(arg, evidence), f"{tree.function}()") for arg in tree.args]
    fewest, most = FUNCTIONS[tree.function]
    if len(args) < fewest or (most is not None and len(args) > most):
        raise _NoValue(f"{tree.function}() called with {len(args)} arguments")
    if tree.function == "min":
        return min(args)
    if tree.function == "max":
        return max(args)
    if tree.function == "abs":
        return abs(args[0])
    if tree.function == "clamp":
        x, low, high = args
        if low > high:
            raise _NoValue(f"clamp() bounds cross ({low:g} > {high:g})")
        return min(max(x, low), high)
    x, k = args
    if k == 0:
        raise _NoValue("is_multiple() by zero")
    return math.fmod(x, k) == 0


def _number(value: Value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _NoValue(f"{where} needs a number, got {value!r}")
    return value


def _bool(value: Value, where: str) -> bool:
    if not isinstance(value, bool):
        raise _NoValue(f"{where} needs true or false, got {value!r}")
    return value


def _finite(value: float) -> float:
    if math.isnan(value):
        raise _NoValue("the result is not a number")
    return value


def _equal(left: Value, right: Value) -> bool:
    """Equality within one kind; across kinds (bad evidence) the expression is undefined."""
    if _kind_of(left) != _kind_of(right):
        raise _NoValue(f"cannot compare {left!r} with {right!r}")
    return left == right


def _kind_of(value: Value) -> Kind:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, str):
        return "text"
    return "number"
