"""One-op elementwise kernels over a 1-D extent ``N``, built once per (function, dtypes) and shared by the pointwise
and integer-rule tests: ``out[d] = fn(a[d], ...)`` with one to three inputs of one dtype."""
import intent_trace as intent
from intent_trace import I

_KERNELS: dict = {}


def one_op_kernel(fn, dt, out_dt, arity: int):
    key = (fn, dt, out_dt, arity)
    if key not in _KERNELS:
        if arity == 1:
            @intent.kernel
            def k(a: I.In[dt, ("N",)], out: I.Out[out_dt, ("N",)]):
                d = I.domain(0, a.shape[0])
                out[d] = fn(a[d])
        elif arity == 2:
            @intent.kernel
            def k(a: I.In[dt, ("N",)], b: I.In[dt, ("N",)], out: I.Out[out_dt, ("N",)]):
                d = I.domain(0, a.shape[0])
                out[d] = fn(a[d], b[d])
        else:
            @intent.kernel
            def k(a: I.In[dt, ("N",)], b: I.In[dt, ("N",)], c: I.In[dt, ("N",)], out: I.Out[out_dt, ("N",)]):
                d = I.domain(0, a.shape[0])
                out[d] = fn(a[d], b[d], c[d])
        _KERNELS[key] = k
    return _KERNELS[key]
