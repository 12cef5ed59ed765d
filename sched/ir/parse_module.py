"""Reading `@I.ir_module class Module:` (TVM's IRModule in TVMScript) as an `IRModule`: each
`@T.prim_func` method is a function, read as `parser.py` reads one alone, under its method name.
A docstring or `pass` may stand beside them; anything else in the class (Relax functions,
`I.module_attrs`, `T.call_tir` between functions) is an error naming its line.
"""

from __future__ import annotations

import ast

from sched.errors import ScriptError
from sched.ir.module import IRModule

MODULE_DECORATORS = ("I.ir_module", "ir_module", "tvm.script.ir_module", "tvm.script.ir.ir_module")


def is_module(node: ast.stmt) -> bool:
    return isinstance(node, ast.ClassDef)


def parse_module(node: ast.ClassDef, make_parser) -> IRModule:
    """The module of class `node`; `make_parser()` gives a fresh function parser."""
    errors = make_parser()
    if [ast.unparse(d) for d in node.decorator_list] not in ([d] for d in MODULE_DECORATORS):
        shown = ", ".join(f"@{ast.unparse(d)}" for d in node.decorator_list) or "none"
        raise errors.error(node, f"class '{node.name}': expected the decorator @I.ir_module, "
                                 f"got {shown}")
    if node.bases or node.keywords:
        raise errors.error(node, f"class '{node.name}': an @I.ir_module class has no bases")
    functions = {}
    for item in node.body:
        if isinstance(item, ast.FunctionDef):
            if item.name in functions:
                raise errors.error(item, f"function '{item.name}' is defined twice in module "
                                         f"'{node.name}'")
            functions[item.name] = make_parser().function(item)
        elif not (isinstance(item, ast.Pass) or (isinstance(item, ast.Expr) and isinstance(
                item.value, ast.Constant) and isinstance(item.value.value, str))):
            first_line = ast.unparse(item).splitlines()[0]
            raise errors.error(item, f"unknown construct '{first_line}' in module "
                                     f"'{node.name}': it holds @T.prim_func functions")
    if not functions:
        raise ScriptError(f"module '{node.name}' has no @T.prim_func function", node.lineno,
                          None)
    return IRModule(functions, node.name)
