"""Live sketches of a run: what ``run.sketch(name)`` returns for a ``sketch`` stage.

A ``sketch`` stage (``sketch theta(user_id) as users``; fluent
``.sketch(users=sc.theta("user_id"))``) updates sketches from its input rows and lets them
pass unchanged. While the run is live, any thread (another cell, the dashboard) asks
``run.sketch("users")`` for the current answer:

- the **native** engine keeps real sketches (Θ, HLL, KLL, frequent items: ``native/sketch``)
  inside its sketch operator; a query copies the current sketch (DataSketches bytes, read
  back with :mod:`streamcell.sketches`), waiting at most for the batch being absorbed;
- the **reference** engine keeps the exact answer (every distinct value, every value, every
  count), so tests compare the native sketch's estimate with the truth, within the sketch's
  documented bounds.

Both answer through the same API (:class:`SketchValue`); keyed stages (``key_by category``
then ``sketch ...``) give a :class:`KeyedSketch` with one value per key. Values follow the
DataSketches conventions on both engines: nulls are skipped; Θ/HLL ignore empty strings and
count -0.0 as 0.0 and every NaN as one value; KLL ignores NaN.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import polars as pl

from . import plan as P

if TYPE_CHECKING:
    from .types import Schema

_NAN = object()  # every NaN is one distinct value


def _distinct_value(v: Any) -> Any:
    if isinstance(v, float):
        if math.isnan(v):
            return _NAN
        return v + 0.0  # -0.0 -> 0.0
    if isinstance(v, bool):
        return int(v)
    return v


# ----------------------------------------------------------------------------- exact answers


class ExactDistinct:
    """The exact distinct count (the reference engine's Θ / HLL)."""

    exact = True

    def __init__(self) -> None:
        self.values: set[Any] = set()

    def update(self, v: Any) -> None:
        if v is None or v == "":
            return
        self.values.add(_distinct_value(v))

    def copy(self) -> ExactDistinct:
        c = ExactDistinct()
        c.values = set(self.values)
        return c

    def estimate(self) -> float:
        return float(len(self.values))

    def lower_bound(self, num_std: int = 2) -> float:
        return float(len(self.values))

    def upper_bound(self, num_std: int = 2) -> float:
        return float(len(self.values))


class ExactQuantiles:
    """Every value (the reference engine's KLL): exact ranks and quantiles, with the
    DataSketches search criteria (``inclusive``)."""

    exact = True

    def __init__(self) -> None:
        self.values: list[float] = []
        self._sorted: list[float] | None = None

    def update(self, v: Any) -> None:
        if v is None:
            return
        f = float(v)
        if not math.isnan(f):
            self.values.append(f)
            self._sorted = None

    def copy(self) -> ExactQuantiles:
        c = ExactQuantiles()
        c.values = list(self.values)
        return c

    def _s(self) -> list[float]:
        if self._sorted is None:
            self._sorted = sorted(self.values)
        return self._sorted

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def min_value(self) -> float:
        return self._s()[0] if self.values else math.nan

    @property
    def max_value(self) -> float:
        return self._s()[-1] if self.values else math.nan

    def get_quantile(self, rank: float, *, inclusive: bool = False) -> float:
        if not 0.0 <= rank <= 1.0:
            raise ValueError(f"rank must be in [0, 1], got {rank}")
        s = self._s()
        if not s:
            return math.nan
        n = len(s)
        if inclusive:
            i = max(0, math.ceil(rank * n) - 1)
        else:
            i = math.floor(rank * n)
        return s[min(n - 1, i)]

    def get_rank(self, value: float, *, inclusive: bool = False) -> float:
        import bisect

        s = self._s()
        if not s:
            return math.nan
        k = bisect.bisect_right(s, value) if inclusive else bisect.bisect_left(s, value)
        return k / len(s)

    def get_cdf(self, split_points: list[float], *, inclusive: bool = False) -> list[float]:
        return [self.get_rank(x, inclusive=inclusive) for x in split_points] + [1.0]

    def normalized_rank_error(self, pmf: bool = False) -> float:
        return 0.0


class ExactFrequent:
    """Every item's count (the reference engine's frequent items)."""

    exact = True

    def __init__(self) -> None:
        self.counts: Counter[Any] = Counter()

    def update(self, v: Any) -> None:
        if v is None:
            return
        self.counts[int(v) if isinstance(v, bool) else v] += 1

    def copy(self) -> ExactFrequent:
        c = ExactFrequent()
        c.counts = Counter(self.counts)
        return c

    @property
    def total_weight(self) -> int:
        return sum(self.counts.values())

    @property
    def maximum_error(self) -> int:
        return 0

    def get_estimate(self, item: Any) -> int:
        return self.counts.get(item, 0)

    get_lower_bound = get_estimate
    get_upper_bound = get_estimate

    def get_frequent_items(
        self, error_type: str = "no_false_positives", threshold: int | None = None
    ) -> list[tuple[Any, int, int, int]]:
        t = 0 if threshold is None else threshold
        return [(i, c, c, c) for i, c in self.counts.most_common() if c > t]


def exact_for(fn: str) -> Any:
    return (
        ExactFrequent()
        if fn == "frequent"
        else ExactQuantiles()
        if fn == "kll"
        else ExactDistinct()
    )


# ------------------------------------------------------------------------------ one answer


class SketchValue:
    """One sketch's current answer (unkeyed, or one key of a keyed stage).

    Distinct counts (``theta``, ``hll``): :meth:`estimate`, :meth:`lower_bound`,
    :meth:`upper_bound`. Quantiles (``kll``): :meth:`quantile`, :meth:`quantiles`,
    :meth:`rank`, :meth:`cdf`, :attr:`n`, :meth:`rank_error`. Frequent items: :meth:`estimate`
    of an item, :meth:`top`, :attr:`n`. :meth:`snapshot` is the underlying object: a
    :mod:`streamcell.sketches` sketch on the native engine (mergeable, ``to_bytes()`` in the
    DataSketches format), the exact answer on the reference engine.
    """

    def __init__(
        self,
        name: str,
        call: P.SketchCall,
        sk: Any = None,
        *,
        load: Callable[[], Any] | None = None,
        fast: Callable[[], tuple[float, ...]] | None = None,
    ):
        self.name, self.call = name, call
        self._sk_cache, self._load, self._fast = sk, load, fast

    @property
    def _sk(self) -> Any:
        """The underlying sketch, copied from the live operator on first use."""
        if self._sk_cache is None:
            assert self._load is not None
            self._sk_cache = self._load()
        return self._sk_cache

    @property
    def kind(self) -> str:
        return self.call.fn

    @property
    def exact(self) -> bool:
        if self._sk_cache is None and self._fast is not None:
            return False  # a live native sketch
        return bool(getattr(self._sk, "exact", False))

    def snapshot(self) -> Any:
        return self._sk

    def to_bytes(self) -> bytes:
        """The sketch in the Apache DataSketches binary format (native engine)."""
        if self.exact:
            raise TypeError(
                f"sketch {self.name!r} is an exact answer (reference engine); bytes come "
                "from the native engine's sketches"
            )
        return bytes(self._sk.to_bytes())

    def _need(self, *kinds: str) -> None:
        if self.kind not in kinds:
            raise TypeError(
                f"sketch {self.name!r} is {self.kind}; this query is for {'/'.join(kinds)}"
            )

    def estimate(self, item: Any = None) -> float:
        """Distinct count (theta/hll), or an item's estimated count (frequent)."""
        if self.kind == "frequent":
            if item is None:
                raise TypeError(f"sketch {self.name!r} is frequent items: estimate(item)")
            return self._sk.get_estimate(item)
        self._need("theta", "hll")
        if self._fast is not None and self._sk_cache is None:
            return self._fast()[0]
        return float(self._sk.estimate())

    def _bound(self, num_std: int, upper: bool) -> float:
        self._need("theta", "hll")
        if num_std not in (1, 2, 3):
            raise ValueError("num_std must be 1, 2 or 3")
        if self._fast is not None and self._sk_cache is None:
            return self._fast()[num_std + (3 if upper else 0)]
        return float((self._sk.upper_bound if upper else self._sk.lower_bound)(num_std))

    def lower_bound(self, num_std: int = 2) -> float:
        return self._bound(num_std, upper=False)

    def upper_bound(self, num_std: int = 2) -> float:
        return self._bound(num_std, upper=True)

    @property
    def n(self) -> int:
        """Values absorbed (kll), total count (frequent)."""
        self._need("kll", "frequent")
        if self._fast is not None and self._sk_cache is None:
            return int(self._fast()[0])
        if self.kind == "kll":
            return int(self._sk.n)
        return int(self._sk.total_weight)

    def quantile(self, q: float, *, inclusive: bool = False) -> float:
        self._need("kll")
        return float(self._sk.get_quantile(q, inclusive=inclusive))

    def quantiles(self, qs: list[float], *, inclusive: bool = False) -> list[float]:
        return [self.quantile(q, inclusive=inclusive) for q in qs]

    def rank(self, x: float, *, inclusive: bool = False) -> float:
        self._need("kll")
        return float(self._sk.get_rank(x, inclusive=inclusive))

    def cdf(self, splits: list[float], *, inclusive: bool = False) -> list[float]:
        self._need("kll")
        return [float(v) for v in self._sk.get_cdf(list(splits), inclusive=inclusive)]

    def rank_error(self) -> float:
        """The normalized rank error (0 for the exact answer)."""
        self._need("kll")
        return float(self._sk.normalized_rank_error(False))

    def top(self, n: int = 10) -> pl.DataFrame:
        """The most frequent items: item, estimate, lower_bound, upper_bound."""
        self._need("frequent")
        items = self._sk.get_frequent_items("no_false_negatives")
        items = sorted(items, key=lambda t: (-t[1], t[0]))[:n]
        return pl.DataFrame(
            {
                "item": [t[0] for t in items],
                "estimate": [int(t[1]) for t in items],
                "lower_bound": [int(t[2]) for t in items],
                "upper_bound": [int(t[3]) for t in items],
            }
        )

    def summary(self) -> dict[str, Any]:
        """The headline numbers (one row of :meth:`KeyedSketch.to_frame`)."""
        if self.kind in ("theta", "hll"):
            return {
                "estimate": self.estimate(),
                "lower_bound": self.lower_bound(),
                "upper_bound": self.upper_bound(),
            }
        if self.kind == "kll":
            n = self.n
            qs = self.quantiles([0.5, 0.9, 0.99]) if n else [None] * 3
            return {"n": n, "p50": qs[0], "p90": qs[1], "p99": qs[2]}
        top = self.top(1)
        return {
            "n": self.n,
            "top_item": top["item"][0] if top.height else None,
            "top_estimate": int(top["estimate"][0]) if top.height else None,
        }

    def __repr__(self) -> str:
        head = ", ".join(f"{k}={v}" for k, v in self.summary().items())
        return f"<sketch {self.name}: {self.call.text()} {head}>"


# ---------------------------------------------------------------- the run's live sketches


class _Stage:
    """What an engine attaches for one sketch stage: answers per key, any thread."""

    def keys(self) -> list[tuple[Any, ...]]:  # pragma: no cover - interface
        raise NotImplementedError

    def value(self, key: tuple[Any, ...], index: int) -> Any:  # pragma: no cover
        raise NotImplementedError


class ReferenceStage(_Stage):
    """The reference engine's exact answers: a dict key -> one exact answer per sketch."""

    def __init__(self, step: P.Sketch):
        self.step = step
        self.lock = threading.Lock()
        self.state: dict[tuple[Any, ...], list[Any]] = {}
        if not step.keys:
            self.state[()] = [exact_for(c.fn) for _, c in step.sketches]

    def update(self, key: tuple[Any, ...], row: dict[str, Any]) -> None:
        with self.lock:
            st = self.state.get(key)
            if st is None:
                st = self.state[key] = [exact_for(c.fn) for _, c in self.step.sketches]
            for sk, (_, call) in zip(st, self.step.sketches):
                sk.update(row[call.column])

    def keys(self) -> list[tuple[Any, ...]]:
        with self.lock:
            return list(self.state)

    def value(self, key: tuple[Any, ...], index: int) -> Any:
        with self.lock:
            st = self.state.get(key)
            return None if st is None else st[index].copy()


class SketchSlot:
    """``run.sketch(name)``'s target: the stage's answers once the engine has attached them."""

    def __init__(self, name: str, step: P.Sketch, index: int, schema: Schema):
        self.name, self.step, self.index = name, step, index
        self.call = step.sketches[index][1]
        self.key_types = dict(schema)
        self.stage: _Stage | None = None

    def value(self, key: tuple[Any, ...] = ()) -> SketchValue:
        st = self.stage
        if isinstance(st, NativeStage):
            live = st.live(key, self.index)
            if live is not None:
                load, fast = live
                return SketchValue(self.name, self.call, load=load, fast=fast)
        sk = None if st is None else st.value(key, self.index)
        if sk is None:
            if self.step.keys and st is not None:
                raise KeyError(f"sketch {self.name!r}: no rows with key {key!r} yet")
            sk = exact_for(self.call.fn)  # nothing seen yet: the empty answer
            if st is not None and not isinstance(st, ReferenceStage):
                sk = _empty_native(self.call)
        return SketchValue(self.name, self.call, sk)

    def keys(self) -> list[tuple[Any, ...]]:
        return [] if self.stage is None else self.stage.keys()


def _empty_native(call: P.SketchCall) -> Any:
    from . import sketches as S

    if call.fn == "theta":
        return S.ThetaSketch(call.param).compact()
    if call.fn == "hll":
        return S.HllSketch(call.param)
    if call.fn == "kll":
        return S.KllDoublesSketch(call.param)
    return S.FrequentItemsSketch(call.param)


class KeyedSketch:
    """``run.sketch(name)`` of a keyed stage: one :class:`SketchValue` per key.

    ``sk["books"]`` (or ``sk[("books", 2024)]`` for several key columns) is one key's
    answer; :meth:`to_frame` has a row per key with the headline numbers.
    """

    def __init__(self, slot: SketchSlot):
        self._slot = slot

    @property
    def key_columns(self) -> tuple[str, ...]:
        return self._slot.step.keys

    def keys(self) -> pl.DataFrame:
        from .types import polars_schema

        cols = self.key_columns
        ks = self._slot.keys()
        return pl.DataFrame(
            [list(k) for k in ks],
            schema=polars_schema(tuple((c, self._slot.key_types[c]) for c in cols)),
            orient="row",
        )

    def __len__(self) -> int:
        return len(self._slot.keys())

    def __getitem__(self, key: Any) -> SketchValue:
        k = key if isinstance(key, tuple) else (key,)
        if len(k) != len(self.key_columns):
            raise KeyError(f"sketch {self._slot.name!r} is keyed by {', '.join(self.key_columns)}")
        return self._slot.value(k)

    def to_frame(self) -> pl.DataFrame:
        """One row per key: the key columns and the sketch's headline numbers."""
        keys = self.keys()
        rows = [self._slot.value(tuple(k)).summary() for k in keys.iter_rows()]
        if not rows:
            return keys
        return pl.concat([keys, pl.DataFrame(rows)], how="horizontal")

    def __repr__(self) -> str:
        return f"<keyed sketch {self._slot.name}: {self._slot.call.text()} over {len(self)} keys>"


def live(slot: SketchSlot) -> SketchValue | KeyedSketch:
    return KeyedSketch(slot) if slot.step.keys else slot.value()


class FixedStage(_Stage):
    """Answers computed once, after the fact (the Spark engine's merged partial sketches)."""

    def __init__(self, answers: dict[tuple[Any, ...], list[Any]]):
        self.answers = answers

    def keys(self) -> list[tuple[Any, ...]]:
        return list(self.answers)

    def value(self, key: tuple[Any, ...], index: int) -> Any:
        st = self.answers.get(key)
        return None if st is None else st[index]


# ---------------------------------------------------------------------- native engine


class NativeStage(_Stage):
    """A native sketch operator's answers: keys and DataSketches bytes from the operator while
    the program lives (``_runtime.SketchTap``), then a frozen copy taken before it closes."""

    def __init__(self, step: P.Sketch, tap: Any, schema: Schema):
        self.step, self.tap = step, tap
        self.lock = threading.Lock()
        self._cached: tuple[int, dict[tuple[Any, ...], tuple[int, int]]] = (-1, {})
        self.names = [n for n, _ in schema]
        self.key_pos = [self.names.index(k) for k in step.keys]
        self.types = dict(schema)
        self.frozen: dict[tuple[Any, ...], list[Any]] | None = None

    def _index(self) -> dict[tuple[Any, ...], tuple[int, int]]:
        """key -> (partition, key index) (caller holds the lock)."""
        if not self.step.keys:
            return {(): (0, 0)}
        # keys only ever get added: the index is rebuilt when the count changes
        total = sum(self.tap.nkeys(p) for p in range(len(self.tap.states)))
        if total == self._cached[0]:
            return self._cached[1]
        found: list[tuple[int, tuple[Any, ...], int, int]] = []
        for part in range(len(self.tap.states)):
            rb = self.tap.keys(part)
            if rb is None:
                continue
            seqs = rb.column(0).to_pylist()  # the serial of each key's first row
            cols = [rb.column(2 + p).to_pylist() for p in self.key_pos]
            for i, key in enumerate(zip(*cols)):
                found.append((seqs[i], tuple(key), part, i))
        found.sort(key=lambda t: t[0])  # keys in order of first arrival, as the reference
        index = {key: (part, i) for _, key, part, i in found}
        self._cached = (total, index)
        return index

    def _load(self, part: int, i: int, index: int) -> Any:
        from . import sketches as S

        call = self.step.sketches[index][1]
        data = self.tap.to_bytes(part, i, index)
        if call.fn == "theta":
            return S.CompactThetaSketch.from_bytes(data)
        if call.fn == "hll":
            return S.HllSketch.from_bytes(data)
        if call.fn == "kll":
            return S.KllDoublesSketch.from_bytes(data)
        is_str = self.types[call.column].name == "str"
        return (S.FrequentStringsSketch if is_str else S.FrequentItemsSketch).from_bytes(data)

    def keys(self) -> list[tuple[Any, ...]]:
        with self.lock:
            if self.frozen is not None:
                return list(self.frozen)
            return list(self._index())

    def value(self, key: tuple[Any, ...], index: int) -> Any:
        with self.lock:
            if self.frozen is not None:
                st = self.frozen.get(key)
                return None if st is None else st[index]
            where = self._index().get(key)
            return None if where is None else self._load(*where, index)

    def live(
        self, key: tuple[Any, ...], index: int
    ) -> tuple[Callable[[], Any], Callable[[], tuple[float, ...]]] | None:
        """While the program lives: a loader of the sketch (a copy, on first use) and a fast
        path to its headline numbers; None once frozen or for an unknown key."""
        with self.lock:
            if self.frozen is not None:
                return None
            where = self._index().get(key)
        if where is None:
            return None
        part, i = where

        def load() -> Any:
            with self.lock:
                if self.frozen is not None:
                    return self.frozen[key][index]
                return self._load(part, i, index)

        def fast() -> tuple[float, ...]:
            with self.lock:
                if self.frozen is not None:
                    sk = self.frozen[key][index]
                    return _summary_of(self.step.sketches[index][1], sk)
                return tuple(self.tap.summary(part, i, index))

        return load, fast

    def freeze(self) -> None:
        """Copy every answer out of the operator (the driver calls this before closing)."""
        with self.lock:
            if self.frozen is not None:
                return
            frozen: dict[tuple[Any, ...], list[Any]] = {}
            for key, (part, i) in self._index().items():
                frozen[key] = [self._load(part, i, j) for j in range(len(self.step.sketches))]
            self.frozen = frozen
            self.tap = None


def _summary_of(call: P.SketchCall, sk: Any) -> tuple[float, ...]:
    """The numbers of sc_op_sketch_summary, from a sketch object."""
    if call.fn in ("theta", "hll"):
        return (
            float(sk.estimate()),
            *(float(sk.lower_bound(z)) for z in (1, 2, 3)),
            *(float(sk.upper_bound(z)) for z in (1, 2, 3)),
        )
    if call.fn == "kll":
        return (float(sk.n), float(sk.min_value), float(sk.max_value), 0.0, 0.0, 0.0, 0.0)
    return (float(sk.total_weight), float(sk.maximum_error), 0.0, 0.0, 0.0, 0.0, 0.0)


__all__ = [
    "ExactDistinct",
    "ExactFrequent",
    "ExactQuantiles",
    "KeyedSketch",
    "NativeStage",
    "ReferenceStage",
    "SketchSlot",
    "SketchValue",
    "live",
]
