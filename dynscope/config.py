"""dynscope.config: engine settings, stored in the C engine.

    dynscope.config.cache_size_limit = 8   # entries per function (and resume point)
    dynscope.config.accumulated_cache_size_limit = 256  # over all of a function's frames
    dynscope.config.fail_on_cache_limit   # raise CacheLimitError at a limit (default False)
    dynscope.config.cache_limit_warning   # warn when a function reaches it (default True)
    dynscope.config.skip_prefixes         # files never captured: the standard library,
                                          # the tensor libraries, dynscope itself
    dynscope.config.capture_prefixes      # captured even inside a skip prefix:
                                          # site-packages (the longest match wins)
    dynscope.config.force_parameter_static_shapes  # automatic dynamic leaves
                                          # parameters and buffers static (default True)
"""
from __future__ import annotations

from . import _C


class _Config:
    """Settings of the capture engine.  Assignments take effect at once."""

    __slots__ = ()

    @property
    def cache_size_limit(self) -> int:
        """Cache entries per (function, resume point); past it the function
        runs without capture and one CacheLimitWarning is issued."""
        return _C.get_cache_size_limit()

    @cache_size_limit.setter
    def cache_size_limit(self, value: int) -> None:
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"cache_size_limit must be an int, got {type(value).__name__}")
        _C.set_cache_size_limit(value)

    @property
    def accumulated_cache_size_limit(self) -> int:
        """Cache entries over all of a function's frames -- its start and
        every resume point after a graph break -- (default 256, as
        torch.compile's option of that name); past it each of its frames
        runs without capture, as at cache_size_limit, and the cache_limits
        row says which limit."""
        return _C.get_accumulated_cache_size_limit()

    @accumulated_cache_size_limit.setter
    def accumulated_cache_size_limit(self, value: int) -> None:
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError("accumulated_cache_size_limit must be an int, "
                            f"got {type(value).__name__}")
        _C.set_accumulated_cache_size_limit(value)

    @property
    def fail_on_cache_limit(self) -> bool:
        """Raise dynscope.CacheLimitError at a cache limit instead of running
        the frame without capture (default False; torch.compile's
        fail_on_cache_limit_hit).  The message names the frame, the limit,
        its last failing guard and where the translation made that guard."""
        return _C.get_fail_on_cache_limit()

    @fail_on_cache_limit.setter
    def fail_on_cache_limit(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"fail_on_cache_limit must be a bool, got {type(value).__name__}")
        _C.set_fail_on_cache_limit(value)

    @property
    def cache_limit_warning(self) -> bool:
        """Issue a CacheLimitWarning when a function reaches cache_size_limit
        (default True).  False only counts and records it (the cache_limits
        table), leaving the program's warnings its own; `python -m dynscope
        run --capture-all` sets False."""
        return _C.get_cache_limit_warning()

    @cache_limit_warning.setter
    def cache_limit_warning(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"cache_limit_warning must be a bool, got {type(value).__name__}")
        _C.set_cache_limit_warning(value)

    @property
    def skip_tensorless_frames(self) -> bool:
        """Run a frame without capture when nothing in its reach is an array
        or tensor (default True, as torch.compile): its arguments, closure
        and the globals it names hold no ndarray, torch.Tensor or nn.Module,
        directly or two levels down in lists, tuples and dicts (not in other
        objects' attributes), and the globals it names are not numpy or
        torch (or their submodules).  Such a frame could only make an empty
        graph.  The function optimize(fn) or explain(fn) wraps is always
        compiled.  False compiles every frame, as `python -m dynscope run
        --capture-all` sets it (`--capture-tensors` sets True)."""
        return _C.get_skip_tensorless_frames()

    @skip_tensorless_frames.setter
    def skip_tensorless_frames(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"skip_tensorless_frames must be a bool, got {type(value).__name__}")
        _C.set_skip_tensorless_frames(value)

    @property
    def cost_sampling(self) -> bool:
        """While recording, time 1 call in 64 (more often in the first few
        thousand, and every call a timed call makes) to measure what each
        graph break costs (default True): SQL's break_costs, the report's
        and dyntop's break views, sorted by it.  False records no costs
        (those views fall back to the most frequent first) and takes the
        timing off the hit path altogether.  explain always times its call."""
        return _C.get_cost_sampling()

    @cost_sampling.setter
    def cost_sampling(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"cost_sampling must be a bool, got {type(value).__name__}")
        _C.set_cost_sampling(value)

    @property
    def force_parameter_static_shapes(self) -> bool:
        """Automatic dynamic (optimize(dynamic=None)) leaves the sizes of
        parameters and buffers static (default True, as torch.compile's
        option of that name): a torch.nn.Parameter, or a tensor in a
        module's _parameters or _buffers.  Every other tensor the code reads
        -- an argument, an attribute of another object (a KV cache's
        tensors), a list or dict item, a closure or a global -- gets a
        dynamic dimension once that dimension's size changes between two
        translations of a frame.  False lets parameters and buffers become
        dynamic the same way."""
        return _C.get_force_parameter_static_shapes()

    @force_parameter_static_shapes.setter
    def force_parameter_static_shapes(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError("force_parameter_static_shapes must be a bool, "
                            f"got {type(value).__name__}")
        _C.set_force_parameter_static_shapes(value)

    @property
    def skip_prefixes(self) -> tuple:
        """Path prefixes of files whose code is never captured."""
        return _C.get_skip_prefixes()

    @skip_prefixes.setter
    def skip_prefixes(self, value) -> None:
        _C.set_skip_prefixes(tuple(value))

    @property
    def capture_prefixes(self) -> tuple:
        """Path prefixes whose code is captured even though a shorter skip
        prefix matches: by default the site-packages directories (installed
        packages are users' code, though a Python installation keeps them
        inside its standard library's directory).  A file matching both
        follows the longer prefix, so numpy/ inside site-packages stays
        skipped."""
        return _C.get_capture_prefixes()

    @capture_prefixes.setter
    def capture_prefixes(self, value) -> None:
        _C.set_capture_prefixes(tuple(value))

    def __repr__(self) -> str:
        return (f"dynscope.config(cache_size_limit={self.cache_size_limit}, "
                f"accumulated_cache_size_limit={self.accumulated_cache_size_limit}, "
                f"fail_on_cache_limit={self.fail_on_cache_limit}, "
                f"cache_limit_warning={self.cache_limit_warning}, "
                f"skip_tensorless_frames={self.skip_tensorless_frames}, "
                f"force_parameter_static_shapes={self.force_parameter_static_shapes}, "
                f"cost_sampling={self.cost_sampling}, "
                f"skip_prefixes={self.skip_prefixes!r}, "
                f"capture_prefixes={self.capture_prefixes!r})")


config = _Config()
