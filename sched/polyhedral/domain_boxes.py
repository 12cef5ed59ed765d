"""A nest's domain without its existentials, where proven equal (`exact_domain`): the
projections the model makes of split and fused nests keep existentially quantified
variables, and every later isl operation on them costs seconds; a domain proven to be a box
(by counting its points, or testing them one by one) or equal to isl's explicit form is
written without them.
"""

from __future__ import annotations

import math

import islpy as isl

from sched.polyhedral.isl_text import within_operations

# isl operations (0.1 to 1 s) that exact_domain spends on proving a domain without its
# existentials equal to it
DOMAIN_OPERATIONS = 1_000_000


def exact_domain(mapping: isl.Map) -> isl.Set:
    """The domain of `mapping`, written without the existentially quantified variables that
    projecting its outputs leaves (`exists (e0, e1: ...)`) when the set without them is
    the same set. A cooperative fetch's block (a fused loop split by 3 and bound to threads)
    covers a box, but as a projection its domain keeps five existentials, and every later
    subtraction or comparison with it costs seconds (10 s for one equality test). The
    smaller set is used only when proven equal: isl's lexmin writes the domain with its
    divisions explicit, and against that the test is cheap."""
    domain = mapping.domain()
    if all(piece.dim(isl.dim_type.div) == 0 for piece in domain.get_basic_sets()):
        return domain
    counted = within_operations(DOMAIN_OPERATIONS, lambda: box_by_count(mapping, domain))
    if counted is not None:
        return counted
    tested = box_by_points(domain)
    if tested is not None:
        return tested
    plain = domain.remove_divs()
    equal = within_operations(DOMAIN_OPERATIONS,
                              lambda: plain.is_subset(mapping.lexmin().domain()))
    return plain if equal else domain


def box_by_count(mapping: isl.Map, domain: isl.Set) -> isl.Set | None:
    """The domain of `mapping` as its bounding box, where counting proves them equal: the map
    is one to one (instances to loop values), its range is a box of constant bounds, and the
    domain's bounding box has as many points as that box (a subset of a finite set with as
    many points is the set). A split and fused nest of large extents is such a map; the
    lexmin proof took 12 s for one of 4096^3 (its operation count does not bound its time).
    None where one of these does not hold (parameters, a partial tile, a predicate)."""
    if not (mapping.is_single_valued() and mapping.is_injective()):
        return None
    loops = _bounding_box(mapping.range())
    if loops is None or not loops[0].is_subset(mapping.range()):
        return None
    instances = _bounding_box(domain)
    return instances[0] if instances is not None and instances[1] == loops[1] else None


# the most points box_by_points tests one by one (about 0.5 ms each)
TESTED_POINTS = 4096


def box_by_points(domain: isl.Set) -> isl.Set | None:
    """The domain as its bounding box, where a box of at most TESTED_POINTS points (no
    parameters) has each of its points in the domain, tested one by one. A producer recomputed
    per thread with a halo (a 3-D stencil's local input under threadIdx.x, its loops fused and
    split) runs every point of a box, but no loop point maps one to one to an instance
    (box_by_count does not apply) and the lexmin proof ran out of operations; each point's
    test is a small integer feasibility problem. None where the box is larger or a point is
    missing, or where the domain involves a parameter (a point is no point for every value)."""
    params, context = domain.dim(isl.dim_type.param), domain.params()
    within = domain.gist_params(context)        # less the constraints of the parameters alone
    if any(within.involves_dims(isl.dim_type.param, p, 1) for p in range(params)):
        return None
    bounded = _bounding_box(within)
    if bounded is None or bounded[1] > TESTED_POINTS:
        return None
    box, _ = bounded
    # the parameters dropped (isl enumerates no set with parameters)
    plain, plain_box = (s.project_out(isl.dim_type.param, 0, params) for s in (within, box))
    points: list[isl.Point] = []
    plain_box.foreach_point(points.append)
    if all(not plain.intersect(isl.Set.from_point(point)).is_empty() for point in points):
        # (with no parameters the context is the domain projected on nothing, and isl keeps
        # the domain's existentials in it: the box would get them back)
        return box.intersect_params(context) if params else box
    return None


def _bounding_box(points: isl.Set) -> tuple[isl.Set, int] | None:
    """The smallest box around `points` and its number of points, or None where a bound is
    not a constant (parameters, an empty or unbounded set)."""
    bounds = []
    for d in range(points.dim(isl.dim_type.set)):
        low, high = points.dim_min_val(d), points.dim_max_val(d)
        if not (low.is_int() and high.is_int()):
            return None
        bounds.append((low.to_python(), high.to_python()))
    box = isl.Set.universe(points.get_space())
    for d, (low, high) in enumerate(bounds):
        box = box.lower_bound_val(isl.dim_type.set, d, low) \
            .upper_bound_val(isl.dim_type.set, d, high)
    return box, math.prod(high - low + 1 for low, high in bounds)
