"""The consumer instance that reads each producer instance, for reverse_compute_inline of a
consumer that reads the producer's buffer at an affine function of its variables.

A consumer `D[vi, vj] = B[vj, 3 - vi] + 1` reads element `p = g(c)` of its producer's buffer
in instance `c`. Inlining it into the producer runs its body in producer instance `p` for the
consumer instance `c = g⁻¹(p)`. That is what the consumer computed exactly when `g` is
injective on the instances the consumer runs, into those the producer runs (both as the
polyhedral model sees them, predicates and bindings included): no consumer instance is lost
and none runs twice. A producer instance whose element no consumer instance reads (a padded
output's copy back reads the inside only) then stores nothing: the inlined block runs under
the condition, from isl, that the element is read. isl checks both and gives `g⁻¹` as IR.
"""

from __future__ import annotations

import islpy as isl

from sched.errors import ScheduleError
from sched.ir.functor import substitute
from sched.ir.nodes import BlockRealize, BufferStore, Expr, PrimFunc, Var
from sched.polyhedral import build_model
from sched.polyhedral.isl_expr import NotAffine, ast_to_expr, isl_name, pw_aff_to_expr, to_isl

PRIMITIVE = "reverse_compute_inline"


def invert_consumer_access(func: PrimFunc, consumer: BlockRealize, producer: BlockRealize,
                           store: BufferStore, indices: tuple[Expr, ...]
                           ) -> tuple[dict[Var, Expr], Expr | None]:
    """Each iteration variable of `consumer` as an expression of `producer`'s, given that the
    consumer loads the producer's buffer at `indices` and the producer stores it at
    `store.indices`, and the condition on the producer's instances whose element the consumer
    reads (None: all); a ScheduleError says why when the loads do not match the stores one to
    one."""
    shown = f"{store.buffer.name}[{', '.join(i.script() for i in indices)}]"

    def refuse(why: str) -> ScheduleError:
        return ScheduleError(PRIMITIVE, f"block {consumer.block.name!r} reads {shown}: {why}")

    model = build_model(func)
    domains = []
    for realize in (consumer, producer):
        statements = [s for s in model.statements_of_block(realize.block.name) if not s.is_init]
        if len(statements) != 1 or not statements[0].exact:
            raise refuse(f"the instances of block {realize.block.name!r} are not known "
                         f"exactly (a non-affine binding or predicate)")
        domains.append(statements[0].domain)
    c_domain, p_domain = domains
    c_vars = [iv.var for iv in consumer.block.iter_vars]
    p_vars = [iv.var for iv in producer.block.iter_vars]
    c_names = [Var(f"c{k}", v.dtype) for k, v in enumerate(c_vars)]
    p_names = [Var(f"p{k}", v.dtype) for k, v in enumerate(p_vars)]
    p_index = {v: k for k, v in enumerate(p_vars)}
    if sorted(p_index.get(i, -1) for i in store.indices) != list(range(len(p_vars))):
        raise refuse(f"producer {producer.block.name!r} does not store at its iteration "
                     f"variables, each once")
    equalities = []
    for load_index, store_index in zip(indices, store.indices, strict=True):
        text = to_isl(substitute(load_index, dict(zip(c_vars, c_names))))
        if text is None:
            raise refuse(f"the index {load_index.script()} is not affine")
        equalities.append(f"{isl_name(p_names[p_index[store_index]])} = {text}")
    c_domain, p_domain = _plain(c_domain, c_names), _plain(p_domain, p_names)
    params = ", ".join(c_domain.get_space().get_var_names(isl.dim_type.param))
    relation = isl.Map(
        f"[{params}] -> {{ [{', '.join(map(isl_name, c_names))}] -> "
        f"[{', '.join(map(isl_name, p_names))}] : {' and '.join(equalities) or 'true'} }}"
    ).intersect_domain(c_domain)
    if not relation.is_injective():
        raise refuse("two of its instances read one element, so the producer's instances "
                     "cannot each run one of them")
    read = relation.range()
    if not read.is_subset(p_domain):
        raise refuse(f"it reads elements block {producer.block.name!r} does not write "
                     f"({read.subtract(p_domain)}), so no producer instance could run it")
    inverse = relation.reverse().as_pw_multi_aff()
    variables = {isl_name(name): var for name, var in zip(p_names, p_vars)}
    # the symbolic dims and scalar parameters the inverse may use (`n - 1 - p0`)
    variables.update({isl_name(v): v for v in (*func.symbolic_vars, *func.params)
                      if isinstance(v, Var)})
    condition = None
    if not read.is_equal(p_domain):
        # the producer writes more than the consumer reads (a padded output copied back):
        # the instances that read nothing store nothing once it is inlined
        condition = _condition(read, p_domain, variables, p_vars[0].dtype)
        if condition is None:
            raise refuse(f"the elements it reads ({read}) are a part of those block "
                         f"{producer.block.name!r} writes that sched cannot write as a "
                         f"condition on its variables")
    context = read
    return {var: pw_aff_to_expr(inverse.get_pw_aff(k), context, variables, var.dtype)
            for k, var in enumerate(c_vars)}, condition


def _condition(read: isl.Set, domain: isl.Set, variables: dict[str, Var],
               dtype: str) -> Expr | None:
    """`read` within `domain` as a condition on the producer's variables (and parameters;
    constants of `dtype`, theirs), as isl writes it for code (`p0 % 2 == 0` for every other
    row), or None where it cannot."""
    def as_params(s: isl.Set) -> isl.Set:
        return s.move_dims(isl.dim_type.param, s.dim(isl.dim_type.param),
                           isl.dim_type.set, 0, s.dim(isl.dim_type.set)).params()
    context = as_params(domain)
    try:
        ast = isl.AstBuild.from_context(context).expr_from_set(as_params(read).gist(context))
        return ast_to_expr(ast, variables, dtype)
    except (isl.Error, NotAffine, KeyError, TypeError):
        return None


def _plain(domain: isl.Set, names: list[Var]) -> isl.Set:
    """`domain` with no tuple name and its dimensions named `names`."""
    domain = domain.reset_tuple_id()
    for k, name in enumerate(names):
        domain = domain.set_dim_name(isl.dim_type.set, k, isl_name(name))
    return domain
