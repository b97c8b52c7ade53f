/*
 * break_types.c -- the break-type table (contract: break_types.h) and the
 * ordered rules that map a reason's text to its type.
 *
 * A rule is a fragment of a reason's fixed text (the literal parts of the
 * engine's format strings, never the names they substitute): '^' anchors it
 * at the start.  Rules are tried in order and the first that matches wins,
 * so a specific rule comes before the general one it refines.
 */
#include "break_types.h"

#include <stdbool.h>
#include <string.h>

enum {
    T_PRINT, T_BUILTIN, T_DATA_BRANCH, T_DATA_ESCAPE, T_DATA_SHAPE, T_FORMAT,
    T_VISIBLE_WRITE, T_CONTAINER_MUTATION, T_OPAQUE_CALL, T_MODULE_CALL, T_GENERATOR,
    T_RAISES, T_CONTEXT_MANAGER, T_TRY_BLOCK, T_ATTRIBUTE, T_NEW_OBJECT, T_NOT_CONSTANT,
    T_UNROLL, T_INPUT_SIZE, T_VARIABLES, T_BYTECODE, T_IMPORT, T_TENSOR_OP, T_SIDE_EFFECT,
    T_COPY, T_BUILTIN_OP, T_MODULE_CONTAINER, T_GENERATOR_FRAME, T_NOT_A_FUNCTION,
    T_REFCOUNTS, T_SKIP_RULE, T_ESCAPE_HATCH, T_BACKEND_ERROR, T_OTHER, T__COUNT
};

static const BreakType types[T__COUNT] = {
    [T_PRINT] = {"DS0001", "print", BREAK_YOUR_CODE,
        "A call to print() writes to the terminal: it must happen when the program "
        "runs, in order with everything else, so the graph ends before it.",
        "Collect the values and print them after the captured call, or log from a "
        "function outside it.",
        "def f(x):\n    print(x.shape)\n    return x * 2"},
    [T_BUILTIN] = {"DS0002", "builtin-call", BREAK_ENGINE_LIMIT,
        "A call to a builtin function the engine does not model (open, input, id, "
        "setattr on a new name ...): it runs in the interpreter, between graphs.",
        "Move the call out of the captured function. If the builtin is pure, the "
        "engine could model it: report it.",
        "def f(x):\n    h = id(x)\n    return x + h"},
    [T_DATA_BRANCH] = {"DS0003", "data-dependent-branch", BREAK_FUNDAMENTAL,
        "A Python if, while, and/or or assert on a tensor's values: which way it "
        "goes is known only when the graph has run, so no single graph can hold "
        "both sides.",
        "Select with np.where / torch.where or a mask, so both sides are computed "
        "in the graph; or move the branch out of the captured function.",
        "def f(x):\n    if x.sum() > 0:\n        return x\n    return -x"},
    [T_DATA_ESCAPE] = {"DS0004", "data-escape", BREAK_YOUR_CODE,
        "A tensor's value leaves the graph as a Python number or object (.item(), "
        ".tolist(), float(t), int(t), bool(t)): the graph must run to produce it.",
        "Keep the value a tensor inside the captured function (t.sum() rather than "
        "t.sum().item()); convert after the call.",
        "def f(x):\n    return x * x.max().item()"},
    [T_DATA_SHAPE] = {"DS0005", "data-dependent-shape", BREAK_FUNDAMENTAL,
        "The shape of a result depends on the values of a tensor (x[x > 0], "
        "nonzero, unique), and the code uses that shape as a Python value.",
        "Use fixed-size operations (masks, np.where with a fill value), or keep "
        "the shape symbolic (x[mask].sum() needs no shape).",
        "def f(x):\n    return len(x[x > 0])"},
    [T_FORMAT] = {"DS0006", "format-of-a-value", BREAK_YOUR_CODE,
        "An f-string or str() of a value known only when the graph runs (a tensor, "
        "a dynamic number): the text can only be made after the graph.",
        "Format after the captured call, or log the raw values and format them "
        "later.",
        "def f(x, step):\n    print(f\"step {step}: {x.mean()}\")\n    return x"},
    [T_VISIBLE_WRITE] = {"DS0007", "write-into-visible-array", BREAK_YOUR_CODE,
        "An operation writes into an array or tensor the program can see (out=, "
        "inplace= of a value known only when the graph runs, a[i] = v on an input NumPy array, an in-place write into a "
        "leaf tensor that requires grad): the graph computes values, it does not "
        "write into the program's buffers.",
        "Compute out of place (y = x + 1) and return the result; write into the "
        "program's arrays after the call.",
        "def f(x, out):\n    np.add(x, 1, out=out)\n    return out"},
    [T_CONTAINER_MUTATION] = {"DS0008", "container-mutation", BREAK_ENGINE_LIMIT,
        "The code changes a list, dict or set the program can see (append, "
        "update, item assignment): the engine replays attribute writes, but not "
        "yet these.",
        "Build a new container and return it, or mutate it outside the captured "
        "function.",
        "def f(x, log):\n    log.append(x.sum())\n    return x"},
    [T_OPAQUE_CALL] = {"DS0009", "opaque-call", BREAK_ENGINE_LIMIT,
        "A call to something the engine cannot look into or does not model: a C "
        "function or method that is not a known tensor operation, a callable "
        "object, a function made while tracing, or a call that raises on these "
        "arguments.",
        "Move the call out of the captured function, or replace it with tensor "
        "operations the engine captures.",
        "def f(x):\n    return some_c_extension.transform(x)"},
    [T_MODULE_CALL] = {"DS0010", "module-call", BREAK_ENGINE_LIMIT,
        "A call to an nn.Module the engine does not inline: it has hooks, an "
        "instance-level forward, a compiled call, or a forward that is not Python.",
        "Remove the hooks while capturing, or capture the module's forward itself.",
        "m.register_forward_hook(hook)\ndef f(x):\n    return m(x)"},
    [T_GENERATOR] = {"DS0011", "generator", BREAK_ENGINE_LIMIT,
        "A generator the engine cannot run to its end while tracing (one the "
        "program receives, resumes while it runs, or a generator expression "
        "passed somewhere other than tuple()/list()/sum()/any()/all()/min()/max()/"
        "sorted()).",
        "Materialize it inside the function (list(gen)) or move the generator out.",
        "def f(xs):\n    return (x * 2 for x in xs)"},
    [T_RAISES] = {"DS0012", "raises", BREAK_YOUR_CODE,
        "The traced code raises an exception here (a TypeError of a call, a "
        "KeyError, an explicit raise, an exception while running an operation on "
        "the example values): the call runs in the interpreter, which raises it "
        "for real.",
        "If the exception is expected control flow (try/except around a lookup), "
        "test the condition instead of catching; otherwise fix the error.",
        "def f(x, d):\n    return x * d[\"missing\"]"},
    [T_CONTEXT_MANAGER] = {"DS0013", "context-manager", BREAK_ENGINE_LIMIT,
        "A with block the engine does not model: a context manager other than "
        "torch's grad and autocast modes and @contextmanager functions, one left "
        "by an exception or a break, or one whose protocol is used by hand.",
        "Enter the context outside the captured function, or use "
        "torch.no_grad()/torch.autocast, which are captured.",
        "def f(x):\n    with open('log') as fh:\n        return x * 2"},
    [T_TRY_BLOCK] = {"DS0014", "try-block", BREAK_ENGINE_LIMIT,
        "A graph cannot end inside a try block of the frame itself (the plan "
        "cannot enter the handler), so the frame runs without capture when a "
        "break falls in one.",
        "Move the try/except out of the captured function, or the break out of "
        "the try.",
        "def f(x):\n    try:\n        print(x)\n    except ValueError:\n        pass\n    return x"},
    [T_ATTRIBUTE] = {"DS0015", "attribute-lookup", BREAK_ENGINE_LIMIT,
        "An attribute lookup runs code the engine does not model: a custom "
        "__getattribute__, a __getattr__ or property that is not Python, a data "
        "descriptor, super() in an unusual form.",
        "Read the attribute outside the captured function and pass the value in.",
        "class C:\n    def __getattribute__(self, n): ...\ndef f(x, c):\n    return x * c.k"},
    [T_NEW_OBJECT] = {"DS0016", "new-object", BREAK_ENGINE_LIMIT,
        "An object made while tracing uses a protocol the engine does not model "
        "(an __init__ that is not Python, __bool__/__len__/__iter__ that give odd "
        "results, enum comparisons with a Python __eq__).",
        "Make the object outside the captured function and pass it in.",
        "def f(x):\n    return Config(x.shape).scale * x"},
    [T_NOT_CONSTANT] = {"DS0017", "needs-a-constant", BREAK_ENGINE_LIMIT,
        "A value known only when the graph runs is used where the translator "
        "needs a constant (a dict key, an index, a slice bound, the arguments of "
        "a folded call, a truth test).",
        "Pass the value in as a Python constant, or express the computation with "
        "tensor operations.",
        "def f(x, d):\n    return d[x.argmax()]"},
    [T_UNROLL] = {"DS0018", "unroll-bound", BREAK_ENGINE_LIMIT,
        "A loop or recursion beyond the translator's bounds (10000 iterations, "
        "1000 array rows, the inlining depth, the instruction budget).",
        "Vectorize the loop (one tensor operation instead of a Python loop over "
        "rows), or capture the loop's body instead of the loop.",
        "def f(x):\n    for row in x:      # 5000 rows\n        ...\n    return x"},
    [T_INPUT_SIZE] = {"DS0019", "input-size", BREAK_ENGINE_LIMIT,
        "An input beyond the guard engine's bounds: a list, tuple or dict of "
        "very many items, a value nested very deep, a call of very many "
        "arguments, more guards than an entry may hold.",
        "Pass a tensor instead of a long list of numbers, or fewer, larger "
        "arguments.",
        "def f(xs):          # a list of 100000 floats\n    return sum(xs)"},
    [T_VARIABLES] = {"DS0020", "closure-or-variable", BREAK_ENGINE_LIMIT,
        "A variable the engine does not follow: a nonlocal store, a cell of an "
        "enclosing function, a function made while tracing that escapes, a name "
        "that is not defined or read before assignment.",
        "Pass the value in as an argument; define functions outside the "
        "captured one.",
        "def f(x):\n    n = 0\n    def inc():\n        nonlocal n\n        n += 1\n    inc()\n    return x"},
    [T_BYTECODE] = {"DS0021", "bytecode", BREAK_ENGINE_LIMIT,
        "An instruction or operator form the translator does not implement.",
        "Report it with the code: it is the engine's to add.",
        "def f(x):\n    match x.shape:          # MATCH_SEQUENCE\n        case (3,):\n"
        "            return x + 1\n    return x"},
    [T_IMPORT] = {"DS0022", "import", BREAK_YOUR_CODE,
        "An import inside the captured function of a module not imported yet "
        "(importing runs the module's code), or an import form the engine does "
        "not follow.",
        "Import at module level.",
        "def f(x):\n    import scipy.special\n    return scipy.special.expit(x)"},
    [T_TENSOR_OP] = {"DS0023", "tensor-op", BREAK_ENGINE_LIMIT,
        "A tensor operation in a form the engine does not model: a random draw "
        "with generator= or on another device, a result that is not an array (a "
        "named tuple), an argument that is not a tensor or a constant.",
        "Call the operation in its plain form (the default generator, "
        "positional tensors), or outside the captured function.",
        "def f(x, g):\n    return torch.randn(3, generator=g) + x"},
    [T_SIDE_EFFECT] = {"DS0024", "side-effect", BREAK_ENGINE_LIMIT,
        "A change to the program's state the engine does not replay after the "
        "graph: deleting attributes, a dict or set changed while it is read, a "
        "weak reference, an object the program would get in a state the engine "
        "cannot rebuild.",
        "Make the change outside the captured function, or return the new value "
        "and store it after the call.",
        "def f(x, obj):\n    del obj.cache\n    return x"},
    [T_COPY] = {"DS0025", "copy", BREAK_ENGINE_LIMIT,
        "copy.copy or copy.deepcopy of an object the engine does not model the "
        "copy of (own __copy__/__deepcopy__, __slots__, a copier in copyreg, "
        "very large or deep structures).",
        "Copy outside the captured function.",
        "def f(x, cfg):\n    c = copy.deepcopy(cfg)\n    return x * c.scale"},
    [T_BUILTIN_OP] = {"DS0026", "container-op", BREAK_ENGINE_LIMIT,
        "A builtin or container operation in a form the engine does not model "
        "(a dict method, ** of a mapping that is not a dict, isinstance/callable "
        "of an unusual value, sorted with a key, 'in' over unknown values).",
        "Use the plain form (a dict, sorted without key), or do it outside the "
        "captured function.",
        "def f(x, m):\n    return g(x, **m)     # m a Mapping, not a dict"},
    [T_MODULE_CONTAINER] = {"DS0027", "module-container", BREAK_ENGINE_LIMIT,
        "Indexing or iterating an nn.Module container (ModuleList, Sequential) "
        "that lacks the usual _modules layout, or with an index only known at "
        "run time.",
        "Index the container with a constant, or iterate it whole.",
        "def f(x, i):\n    return layers[i](x)     # i a tensor"},
    [T_GENERATOR_FRAME] = {"DS0028", "generator-function", BREAK_ENGINE_LIMIT,
        "The frame is a generator, coroutine or async generator: it runs without "
        "capture (the functions it calls are captured).",
        "Capture the function the generator calls per item, not the generator.",
        "def f(xs):\n    for x in xs:\n        yield x * 2"},
    [T_NOT_A_FUNCTION] = {"DS0029", "module-or-class-body", BREAK_FUNDAMENTAL,
        "A module's or class's body runs once and is not a function call: it is "
        "never captured.",
        "Nothing to do: put the tensor code in functions.",
        "x = np.ones(3) * 2    # at module level"},
    [T_REFCOUNTS] = {"DS0030", "reads-refcounts", BREAK_FUNDAMENTAL,
        "The code reads reference counts (sys.getrefcount), which capture itself "
        "changes: it runs without capture so it sees what it would without "
        "dynscope.",
        "Nothing to do: the frame keeps its exact behaviour.",
        "def f(x):\n    return sys.getrefcount(x)"},
    [T_SKIP_RULE] = {"DS0031", "skip-rule", BREAK_YOUR_CODE,
        "The file is in config.skip_prefixes: the configuration says not to "
        "capture it.",
        "Remove the prefix from dynscope.config.skip_prefixes to capture it.",
        "dynscope.config.skip_prefixes = ('/opt/vendor/',)"},
    [T_ESCAPE_HATCH] = {"DS0032", "escape-hatch", BREAK_YOUR_CODE,
        "The function is marked dynscope.disable (or torch.compiler.disable): "
        "the mark says to run it without capture, so the graph ends before the call.",
        "Remove the mark to capture the call, or mark it dynscope.allow_in_graph "
        "(one opaque node) if it is a pure tensor function.",
        "@dynscope.disable\ndef log_stats(x):\n    print(x.mean())"},
    [T_BACKEND_ERROR] = {"DS0033", "backend-error", BREAK_YOUR_CODE,
        "The backend raised while compiling the frame's graph, or returned no "
        "callable (dynscope.BackendCompilerFailed, the backend's exception as its "
        "__cause__): the frame runs without capture.",
        "python -m dynscope repro FILE.db --compile FUNCTION:ID --minify -o repro.py "
        "writes a script with the fewest graph nodes that still make the backend "
        "fail; fix the backend, or keep the failing call out of the graph "
        "(dynscope.disable).",
        "def my_backend(gm, example_inputs):\n    raise NotImplementedError(\"no lowering\")\n\n"
        "@dynscope.optimize(my_backend)\ndef f(x):\n    return x.sin()"},
    [T_OTHER] = {"DS0099", "other", BREAK_ENGINE_LIMIT,
        "A reason no rule of the registry names (an internal error of the engine "
        "or a reason added without a rule: tests/test_breaks_registry.py fails "
        "on the latter).",
        "Report it with the reason text.",
        "# no program: every reason the engine gives has a rule"},
};

/* The rules, first match wins ('^': at the start of the reason). */
static const struct { const char *fragment; int type; } rules[] = {
    /* frame skips */
    {"^code inside a try/with block", T_TRY_BLOCK},
    {"^generator or coroutine", T_GENERATOR_FRAME},
    {"^coroutine or async generator", T_GENERATOR_FRAME},
    {"^module or class body", T_NOT_A_FUNCTION},
    {"^reads reference counts", T_REFCOUNTS},
    {"^file is in config.skip_prefixes", T_SKIP_RULE},
    {": it runs without capture", T_ESCAPE_HATCH},
    {"^marked dynscope.disable", T_ESCAPE_HATCH},
    {"^backend '", T_BACKEND_ERROR},
    {"^marked torch.compiler.disable", T_ESCAPE_HATCH},
    {"^a substitute_in_graph replacement", T_ESCAPE_HATCH},
    /* what data does */
    {"^call to builtin print", T_PRINT},
    {"on a tensor value `", T_DATA_BRANCH},
    {"on a value whose truth is not known while tracing", T_NOT_CONSTANT},
    {" of a dimension whose size is dynamic (the number of pieces", T_NOT_CONSTANT},
    {" of numbers known only when the graph runs, inside a try", T_RAISES},
    {"^data escape: f-string", T_FORMAT},
    {"whose shape depends on its values", T_DATA_SHAPE},
    {"^data escape:", T_DATA_ESCAPE},
    {"^call to builtin hasattr on a tensor value", T_DATA_ESCAPE},
    {" on a tensor value", T_DATA_ESCAPE},       /* call to builtin float on ..., a branch */
    {"^f-string of a value that is not a constant", T_FORMAT},
    {"^BUILD_STRING of a non-string", T_FORMAT},
    /* writes */
    {" with out= (writes", T_VISIBLE_WRITE},
    {" with a positional out argument", T_VISIBLE_WRITE},
    {" with inplace=", T_VISIBLE_WRITE},
    {" writes into a leaf tensor", T_VISIBLE_WRITE},
    {"^in-place operator ", T_VISIBLE_WRITE},
    {"^item assignment into a dict the frame reaches two ways", T_CONTAINER_MUTATION},
    {"^item assignment into a ", T_VISIBLE_WRITE},
    {"^in-place += on a list the program can see", T_CONTAINER_MUTATION},
    {"^adding to a set the program can see", T_CONTAINER_MUTATION},
    {"^extending a list the program can see", T_CONTAINER_MUTATION},
    {"^merging into a dict the program can see", T_CONTAINER_MUTATION},
    {"^MAP_ADD into a dict the program can see", T_CONTAINER_MUTATION},
    {"^a dict reached two ways", T_CONTAINER_MUTATION},
    {"^a write into a set the frame reaches two ways", T_CONTAINER_MUTATION},
    {"^a set read after a write into it", T_CONTAINER_MUTATION},
    {") of a value that is not a hashable constant", T_CONTAINER_MUTATION},
    {" of a module whose _parameters the frame wrote", T_CONTAINER_MUTATION},
    {" of a module whose _buffers the frame wrote", T_CONTAINER_MUTATION},
    {" of a module whose _modules the frame wrote", T_CONTAINER_MUTATION},
    /* errors the code raises */
    {"^list assignment index out of range", T_RAISES},
    {"^an unhashable ", T_RAISES},
    {" raises on these arguments", T_RAISES},
    {" raises on this function", T_RAISES},
    {"^sorted() raises on these values", T_RAISES},
    {" raised while tracing", T_RAISES},
    {" raised ", T_RAISES},
    {"^raises ", T_RAISES},
    {"^raise ... from", T_RAISES},
    {"^raising a value", T_RAISES},
    {"^re-raising an exception", T_RAISES},
    {"^a bare raise", T_RAISES},
    {"^an except clause", T_RAISES},
    {"^an exception made of", T_RAISES},
    {"^missing argument ", T_RAISES},
    {"^missing keyword argument", T_RAISES},
    {"^too many positional arguments", T_RAISES},
    {"^multiple values for argument", T_RAISES},
    {"^unexpected keyword argument", T_RAISES},
    {"^keyword argument ", T_RAISES},
    {"^keywords must be strings", T_RAISES},
    {"() takes no arguments", T_RAISES},
    {"^unpacking ", T_RAISES},
    {"^index out of range", T_RAISES},
    {" out of range of a ", T_RAISES},
    {"^a missing key", T_RAISES},
    {"^dict.pop() of a missing key", T_RAISES},
    {"^zip(strict=True)", T_RAISES},
    {"^sum() of strings", T_RAISES},
    {"^super(type, obj): obj is not", T_RAISES},
    {"^next() of a generator that has ended", T_RAISES},
    {"' object has no attribute '", T_RAISES},
    {"^name '", T_VARIABLES},
    /* context managers and try */
    {"contextmanager", T_CONTEXT_MANAGER},
    {"^a with block", T_CONTEXT_MANAGER},
    {"^`with torch.autocast", T_CONTEXT_MANAGER},
    {"^leaving a ", T_CONTEXT_MANAGER},
    {"^a grad-mode manager used", T_CONTEXT_MANAGER},
    {"^torch state managers left", T_CONTEXT_MANAGER},
    {"^set_grad_enabled() of a mode", T_CONTEXT_MANAGER},
    {"^grad mode without torch", T_CONTEXT_MANAGER},
    /* generators */
    {"^call to generator function", T_GENERATOR},
    {"^a generator", T_GENERATOR},
    {"^yield outside", T_GENERATOR},
    {"^next item of an iterator", T_BUILTIN_OP},
    /* modules, calls */
    {" with hooks (nn.Module", T_MODULE_CALL},
    {" whose hooks the traced code changed", T_MODULE_CALL},
    {"^a forward hook registered under a key that is not an int", T_MODULE_CALL},
    {" with an instance forward or a compiled call", T_MODULE_CALL},
    {", whose forward is not a Python function", T_MODULE_CALL},
    {"^call to builtin ", T_BUILTIN},
    {"^call to ", T_OPAQUE_CALL},
    {"its meta kernel gives other sizes", T_DATA_SHAPE},
    {"^call of torch.ops ", T_OPAQUE_CALL},
    {"^next() of an exhausted iterator", T_RAISES},
    {"() inside a torch state manager entered while tracing", T_CONTEXT_MANAGER},
    {"torch function mode", T_CONTEXT_MANAGER},
    {" in a classmethod: ", T_ATTRIBUTE},
    {"() raises on these arguments", T_RAISES},
    {", whose result is marked constant, returned", T_NOT_CONSTANT},
    {", whose result is a constant, with arguments", T_NOT_CONSTANT},
    {", whose result is a constant, raises", T_RAISES},
    {"^call of a ", T_OPAQUE_CALL},
    {"^method .", T_OPAQUE_CALL},
    {"^a call of a dead weak reference", T_SIDE_EFFECT},
    {"^a functools.partial whose ", T_OPAQUE_CALL},
    {"^functools.partial", T_OPAQUE_CALL},
    {"^a functools.partial made while tracing that the program gets", T_VARIABLES},
    {"^a torch.vmap function made while tracing that the program gets", T_VARIABLES},
    {"^torch.vmap", T_OPAQUE_CALL},
    {"^an exception raised inside a function under torch.vmap", T_OPAQUE_CALL},
    {"^map() of more than", T_BUILTIN_OP},
    {".apply with grad mode on", T_OPAQUE_CALL},
    {".apply with keyword arguments", T_OPAQUE_CALL},
    {"^autograd.Function ", T_OPAQUE_CALL},
    {".forward returns an input as it is", T_OPAQUE_CALL},
    {"^a ModuleList without", T_MODULE_CONTAINER},
    {" without _modules", T_MODULE_CONTAINER},
    /* tensors */
    {" draws random numbers on a device", T_TENSOR_OP},
    {" with generator= (", T_TENSOR_OP},
    {" (a named tuple)", T_TENSOR_OP},
    {", not an array", T_TENSOR_OP},
    {" to a tensor operation", T_TENSOR_OP},
    {"^dimension ", T_TENSOR_OP},
    {"^copy of a tensor", T_TENSOR_OP},
    {"^iterating a 0-d array", T_TENSOR_OP},
    {"^len() of a 0-d array", T_TENSOR_OP},
    {"^indexing an array with", T_TENSOR_OP},
    {"^array attribute ", T_TENSOR_OP},
    /* copies */
    {"^copy ", T_COPY},
    {"^deep copy ", T_COPY},
    /* bounds */
    {"(unrolling bound", T_UNROLL},
    {"^more than ", T_UNROLL},
    {"^inlining deeper than", T_UNROLL},
    {"^a loop iterator beyond", T_UNROLL},
    {"^a graph break inside a loop over enumerate()", T_UNROLL},
    {" items as input", T_INPUT_SIZE},
    {" members as input", T_INPUT_SIZE},
    {"^the keys of a ", T_BUILTIN_OP},
    {"^inputs that need more than", T_INPUT_SIZE},
    {"^a value nested more than", T_INPUT_SIZE},
    {"^a call with more than", T_INPUT_SIZE},
    {"^zip() of more than", T_INPUT_SIZE},
    /* variables and functions */
    {"^stores into a cell", T_VARIABLES},
    {"^reads ", T_VARIABLES},
    {"^LOAD_CLOSURE", T_VARIABLES},
    {"^a free variable", T_VARIABLES},
    {"^a closure cell", T_VARIABLES},
    {"^assigns variable ", T_VARIABLES},
    {"^deletes variable ", T_VARIABLES},
    {"^an unbound variable", T_VARIABLES},
    {"^a cell variable", T_VARIABLES},
    {"^a function", T_VARIABLES},
    {"^MAKE_FUNCTION", T_VARIABLES},
    {"^SET_FUNCTION_ATTRIBUTE", T_VARIABLES},
    /* imports */
    {"import", T_IMPORT},
    /* side effects */
    {" deleted while tracing", T_SIDE_EFFECT},
    {"^deleting ", T_SIDE_EFFECT},
    {"^a dict changed while tracing", T_SIDE_EFFECT},
    {" changed while a loop iterates", T_SIDE_EFFECT},
    {"^a reversed() iterator over a list, held across", T_SIDE_EFFECT},
    {"^an iterator iter() made that the program gets", T_SIDE_EFFECT},
    {"^a loop over a dict the program can see, after writes into it", T_SIDE_EFFECT},
    {"^a set made while tracing from another set", T_SIDE_EFFECT},
    {" the program would get", T_SIDE_EFFECT},
    {"^a value that cannot be rebuilt", T_SIDE_EFFECT},
    {"^a weak reference", T_SIDE_EFFECT},
    {"__dict__ of an object", T_SIDE_EFFECT},
    {" read after this frame wrote one", T_SIDE_EFFECT},
    {"^changing a ", T_SIDE_EFFECT},
    {"^setting attribute ", T_SIDE_EFFECT},
    {" the program can see", T_SIDE_EFFECT},
    /* objects made while tracing */
    {" of a new ", T_NEW_OBJECT},
    {"^a new ", T_NEW_OBJECT},
    {"^iterating a new ", T_NEW_OBJECT},
    {"() with an __init__ that is not Python", T_NEW_OBJECT},
    {".__init__ returned a value", T_NEW_OBJECT},
    {"^truth of a new ", T_NEW_OBJECT},
    {"^comparing enum members", T_NEW_OBJECT},
    /* attribute machinery */
    {" has no attribute '", T_RAISES},
    {"attribute '", T_ATTRIBUTE},
    {"^property '", T_ATTRIBUTE},
    {"__getattribute__", T_ATTRIBUTE},
    {"__getattr__", T_ATTRIBUTE},
    {"^super()", T_ATTRIBUTE},
    {"^super().", T_ATTRIBUTE},
    {"^'is' of a missing attribute", T_ATTRIBUTE},
    /* values that must be constants */
    {"not a constant", T_NOT_CONSTANT},
    {"non-constant", T_NOT_CONSTANT},
    {"not constants", T_NOT_CONSTANT},
    {"only immutable constants are folded", T_NOT_CONSTANT},
    {"^a value that is not a constant", T_NOT_CONSTANT},
    {"^None test on an internal value", T_BYTECODE},
    /* containers and builtins */
    {"^dict method ", T_BUILTIN_OP},
    {"^keyword arguments to ", T_BUILTIN_OP},
    {"^dict.", T_BUILTIN_OP},
    {"^dict() of ", T_BUILTIN_OP},
    {"^list.", T_BUILTIN_OP},
    {"^** of ", T_BUILTIN_OP},
    {"^a lookup in a dict input", T_BUILTIN_OP},
    {"^isinstance() ", T_BUILTIN_OP},
    {"^issubclass() ", T_BUILTIN_OP},
    {" of sequences whose items are known only", T_NOT_CONSTANT},
    {"^type.__instancecheck__ ", T_BUILTIN_OP},
    {"^type() of ", T_BUILTIN_OP},
    {"^callable() ", T_BUILTIN_OP},
    {"^inspect.signature() ", T_BUILTIN_OP},
    {"^sorted() ", T_BUILTIN_OP},
    {"^'in' ", T_BUILTIN_OP},
    {"^'is' ", T_BUILTIN_OP},
    {"^enumerate() ", T_BUILTIN_OP},
    {"^len() of ", T_BUILTIN_OP},
    {"^iterating ", T_BUILTIN_OP},
    {"^indexing ", T_BUILTIN_OP},
    {"^subscript of ", T_BUILTIN_OP},
    {"^slicing ", T_BUILTIN_OP},
    {"^class attribute ", T_ATTRIBUTE},
    {"() of a ", T_BUILTIN_OP},
    {"() with these arguments", T_BUILTIN_OP},
    {"() of a value ", T_BUILTIN_OP},
    /* the translator itself */
    {"^unsupported bytecode", T_BYTECODE},
    {"^BINARY_OP ", T_BYTECODE},
    {"^COMPARE_OP ", T_BYTECODE},
    {"^BUILD_CONST_KEY_MAP", T_BYTECODE},
    {"^CALL_KW without", T_BYTECODE},
    {"^ran past the end", T_BYTECODE},
    {"^unary ", T_BYTECODE},
    {"^operator ", T_BYTECODE},
    {"^object.__getattribute__", T_ATTRIBUTE},
    {"^object.", T_NEW_OBJECT},
};

static bool rule_matches(const char *fragment, const char *reason)
{
    if (fragment[0] == '^')
        return strncmp(reason, fragment + 1, strlen(fragment + 1)) == 0;
    return strstr(reason, fragment) != NULL;
}

const BreakType *break_type_of(const char *kind, const char *reason)
{
    if (reason == NULL)
        return &types[T_OTHER];
    if (kind != NULL && strcmp(kind, "data_dependent_branch") == 0)
        return &types[T_DATA_BRANCH];
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if (rule_matches(rules[i].fragment, reason))
            return &types[rules[i].type];
    return &types[T_OTHER];
}

const BreakType *break_type_by_id(const char *id)
{
    for (int i = 0; id != NULL && i < T__COUNT; i++)
        if (strcmp(types[i].id, id) == 0)
            return &types[i];
    return NULL;
}

const char *break_class_name(BreakClass cls)
{
    static const char *const names[BREAK_CLASS__COUNT] = {
        [BREAK_YOUR_CODE] = "your code", [BREAK_LIBRARY] = "library code",
        [BREAK_ENGINE_LIMIT] = "engine limit", [BREAK_FUNDAMENTAL] = "fundamental",
    };
    return (unsigned)cls < BREAK_CLASS__COUNT ? names[cls] : "?";
}

const BreakType *break_type_at(size_t i)
{
    return i < T__COUNT ? &types[i] : NULL;
}
