"""What moto works out again for every request from the same input, remembered
(:func:`memoised_moto`)."""

from __future__ import annotations

import contextlib
import copy
import functools
import importlib
import json
import pickle
import string
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Any

from jobkit.local.moto_patches.patching import patched


@contextlib.contextmanager
def memoised_moto() -> Iterator[None]:
    """Remember what moto works out again for every request from the same
    input: an action's method names, a name's snake case, a parsed update
    expression (its copies and checks, see :class:`_ParsedExpressions`) and
    condition, a DynamoDB expression processor's table of node types. And
    make receipt handles with one draw of moto's random generator, not 185."""
    core_responses: Any = importlib.import_module("moto.core.responses")
    sqs_models: Any = importlib.import_module("moto.sqs.models")
    validators: Any = importlib.import_module("moto.dynamodb.parsing.validators")
    parser_class = importlib.import_module("moto.dynamodb.parsing.expressions").UpdateExpressionParser
    condition_class = importlib.import_module("moto.dynamodb.comparisons").ConditionExpressionParser
    traverser_class = importlib.import_module("moto.dynamodb.parsing.ast_nodes").DepthFirstTraverser
    snake_case = functools.lru_cache(maxsize=1024)(core_responses.camelcase_to_underscores)
    parsed = _ParsedExpressions(parser_class.make)
    patches = [
        (
            core_responses,
            "method_names_from_class",
            functools.lru_cache(maxsize=None)(core_responses.method_names_from_class),
        ),
        (core_responses, "camelcase_to_underscores", snake_case),
        (sqs_models, "camelcase_to_underscores", snake_case),
        (sqs_models, "generate_receipt_handle", _receipt_handle),
        (parser_class, "make", staticmethod(parsed.parse)),
        (validators, "deepcopy", parsed.deepcopy),
        (validators.Validator, "validate", lambda validator: parsed.validate(validator)),
        (condition_class, "parse", _parsed_conditions(condition_class.parse)),
        (traverser_class, "nodes_to_be_processed", _node_types),
        (traverser_class, "process", _process_node),
        (traverser_class, "traverse_node_recursively", _traverse),
    ]
    with patched(patches):
        yield


class _ParsedExpressions:
    """moto's update expression parser, remembering each expression's tree.

    moto parses an update expression twice per UpdateItem, and its validator
    works on a deep copy of the tree (it never changes the tree it is given).
    So a tree is parsed once, kept with its pickled form, and each copy the
    validator asks for is unpickled: the same tree (no class in it copies
    itself in its own way), several times faster than ``copy.deepcopy``.
    Anything else the validator copies is deep-copied.

    A validation starts with checks that only look at the tree as parsed
    (one SET, REMOVE, ADD, DELETE clause each; no path twice; no key
    attribute) and either raise or change nothing. Once they have passed for
    a tree with the same names (and table keys), they would pass again: they
    are not run again. The rest of the validation is moto's."""

    def __init__(self, parse: Callable[[str], Any]) -> None:
        self._parse = functools.lru_cache(maxsize=1024)(parse)
        self._pickled: weakref.WeakKeyDictionary[Any, bytes | None] = weakref.WeakKeyDictionary()
        self._sources: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()  # copy -> its tree
        self._passed: weakref.WeakKeyDictionary[Any, set[Hashable]] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def parse(self, expression: str) -> Any:
        tree = self._parse(expression)
        with self._lock:
            if tree not in self._pickled:
                self._pickled[tree] = _pickled(tree)
        return tree

    def deepcopy(self, value: Any, memo: dict[int, Any] | None = None) -> Any:
        pickled = self._pickled_tree(value) if memo is None else None
        if pickled is None:
            return copy.deepcopy(value, memo)
        tree = pickle.loads(pickled)
        with self._lock:
            self._sources[tree] = value
        return tree

    def validate(self, validator: Any) -> Any:
        """moto's ``Validator.validate``: each processor in turn over the tree,
        but for the leading checks already passed by this tree."""
        node = validator.node_to_validate
        with self._lock:
            source = self._sources.get(node)
            passed = self._passed.setdefault(source, set()) if source is not None else set()
        leading = source is not None
        for processor in validator.processors:
            check = _tree_check(processor) if leading else None
            leading = check is not None
            if check is not None and check in passed:
                continue
            node = processor.traverse(node)
            if check is not None:
                with self._lock:
                    passed.add(check)
        return node

    def _pickled_tree(self, value: Any) -> bytes | None:
        with self._lock:
            try:
                return self._pickled.get(value)
            except TypeError:  # no weak reference to it, or no hash: not a parsed tree
                return None


def _tree_check(processor: Any) -> Hashable | None:
    """What a check of moto's validation that looks only at the parsed tree
    depends on besides the tree (its class, the names, the table's keys);
    None for any other processor."""
    validators: Any = importlib.import_module("moto.dynamodb.parsing.validators")
    cls = type(processor)
    if cls is validators.ActionCountValidator:
        return (cls,)
    names = getattr(processor, "expression_attribute_names", None)
    named = None if names is None else frozenset(names.items())
    if cls is validators.OverlappingPathsValidator:
        return (cls, named)
    if cls is validators.UpdateHashRangeKeyValidator:
        return (cls, named, tuple(processor.table_key_attributes))
    return None


def _pickled(value: Any) -> bytes | None:
    """``value`` pickled, or None if it cannot be (it is deep-copied then)."""
    try:
        return pickle.dumps(value, pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError):
        return None


def _parsed_conditions(parse: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """moto's ``ConditionExpressionParser.parse``, remembering its last answers:
    an UpdateItem parses its condition twice, with the same names and values.
    A parse returns the condition (which moto only evaluates) and notes the
    names and values it used in the parser; a remembered one does the same."""
    remembered: OrderedDict[str, tuple[Any, list[str], list[str]]] = OrderedDict()
    lock = threading.Lock()

    def parse_once(parser: Any) -> Any:
        try:
            key = json.dumps(
                [parser.condition_expression, parser.expression_attribute_names, parser.expression_attribute_values],
                sort_keys=True,
            )
        except TypeError:  # binary values: not worth remembering
            return parse(parser)
        with lock:
            answer = remembered.get(key)
        if answer is None:
            condition = parse(parser)
            answer = (condition, list(parser.expr_attr_names_found), list(parser.expr_attr_values_found))
            with lock:
                remembered[key] = answer
                while len(remembered) > _REMEMBERED_CONDITIONS:
                    remembered.popitem(last=False)
            return condition
        parser.expr_attr_names_found.extend(answer[1])
        parser.expr_attr_values_found.extend(answer[2])
        return answer[0]

    return parse_once


#: Condition expressions (with their names and values) remembered, the latest ones.
_REMEMBERED_CONDITIONS = 64


def _receipt_handle() -> str:
    """moto's receipt handle (185 random lowercase letters), drawn at once."""
    from moto.moto_api._internal import mock_random

    return "".join(mock_random.choices(string.ascii_lowercase, k=185))


class _ProcessingTable:
    """What a DynamoDB expression processor does with each type of node.

    moto's processors rebuild their table at every node, and test the node
    against each of its (abstract) classes; which class a type of node
    matches first is the same for every processor of a class, so it is
    worked out once."""

    #: (processor class, node type) -> the processor's table key it matches first, or None.
    _matches: dict[tuple[type, type], type | None] = {}

    def __init__(self, traverser: Any) -> None:
        self._traverser_type = type(traverser)
        self.handlers: dict[type, Any] = traverser._processing_map()
        self.node_types = tuple(self.handlers)

    def handler(self, node_type: type) -> Any:
        """The handler moto's ``process`` picks for this type: the first whose class it is of; or None."""
        key = (self._traverser_type, node_type)
        if key not in self._matches:
            self._matches[key] = next((cls for cls in self.handlers if issubclass(node_type, cls)), None)
        match = self._matches[key]
        return None if match is None else self.handlers[match]


def _processing_table(traverser: Any) -> _ProcessingTable:
    table: _ProcessingTable | None = traverser.__dict__.get("_jobkit_processing_table")
    if table is None:
        table = traverser.__dict__["_jobkit_processing_table"] = _ProcessingTable(traverser)
    return table


def _node_types(traverser: Any) -> tuple[type, ...]:
    return _processing_table(traverser).node_types


def _process_node(traverser: Any, node: Any) -> Any:
    handler = _processing_table(traverser).handler(type(node))
    return None if handler is None else handler(node)


#: Which types are moto's DynamoDB expression nodes.
_NODE_TYPES: dict[type, bool] = {}


def _is_node_type(node_type: type) -> bool:
    if node_type not in _NODE_TYPES:
        _NODE_TYPES[node_type] = issubclass(node_type, importlib.import_module("moto.dynamodb.parsing.ast_nodes").Node)
    return _NODE_TYPES[node_type]


def _traverse(traverser: Any, node: Any, child_id: int = -1) -> Any:
    """moto's ``DepthFirstTraverser.traverse_node_recursively``, step for step
    (children first, each announced to ``pre_processing_of_child``; then the
    node, if of a type the processor handles, replaced by what it returns),
    with each type's class tests made once instead of at every node."""
    table = _processing_table(traverser)
    before_child = traverser.pre_processing_of_child

    def visit(node: Any, child_id: int) -> Any:
        if _is_node_type(type(node)):
            parent = node.parent
            if node.children is not None:
                for index, child in enumerate(node.children):
                    before_child(node, index)
                    visit(child, index)
            handler = table.handler(type(node))
            if handler is not None:
                node = handler(node)
                node.parent = parent
                if parent:
                    parent.children[child_id] = node
        return node

    return visit(node, child_id)
