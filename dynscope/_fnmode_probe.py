"""What a torch function mode's ``__torch_function__`` is handed for one
call (engine/translate/tr_fnmode.c asks, while tracing inside a ``with
SomeTorchFunctionMode():`` block).

torch decides what a mode sees -- which function (``x <= y`` hands over
``Tensor.le``, ``x[i]`` the slot wrapper ``Tensor.__getitem__``), the types,
the arguments in its own order and the keyword arguments (``None``, ``{}``
or a Python function's defaults) -- in C and in each Python-level function's
own ``handle_torch_function`` call.  Rather than restate those rules, the
call is made once under a mode that notes its first dispatch and stops it
there: torch dispatches before it computes anything, so nothing runs.
"""
from torch.overrides import TorchFunctionMode


class _Dispatched(Exception):
    pass


class _Probe(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.seen = None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.seen = (func, tuple(types), tuple(args), kwargs)
        raise _Dispatched


def first_dispatch(method, target, args, kwargs):
    """(func, types, args, kwargs) of the call's first dispatch to a mode,
    or None when the call dispatches to none (then it ran).  method: target
    is the name of a method of args[0]."""
    probe = _Probe()
    try:
        with probe:
            if method:
                getattr(args[0], target)(*args[1:], **kwargs)
            else:
                target(*args, **kwargs)
    except _Dispatched:
        return probe.seen
    return None
