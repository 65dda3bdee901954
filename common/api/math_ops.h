// Arithmetic on variables as Fluid's Python operator overloads emit it
// (math_op_patch): a scalar operand becomes a `scale` op, or a
// fill_constant [1] (force_cpu) feeding an elementwise op; results are named
// "tmp_N". The learning-rate schedules are written with these.
//
// Thread-safety: externally synchronized (appends to the thread's programs).
#pragma once

#include "common/api/program.h"

namespace oar {
namespace math {

Var Scale(const Var& x, float scale, float bias = 0.0f);  // x·scale + bias
inline Var Mul(const Var& x, float s) { return Scale(x, s); }
inline Var Div(const Var& x, float s) { return Scale(x, 1.0f / s); }
inline Var Add(const Var& x, float s) { return Scale(x, 1.0f, s); }
inline Var RSub(float s, const Var& x) { return Scale(x, -1.0f, s); }  // s − x
Var Pow(const Var& x, float exponent);                                 // elementwise_pow(x, fill(exponent))
Var RPow(float base, const Var& x);                                    // elementwise_pow(fill(base), x)
Var RDiv(float numerator, const Var& x);                               // elementwise_div(fill(numerator), x)
Var Less(const Var& x, float y);                                       // less_than(x, fill(y))
// A float32 [1] constant named tmp_N (fill_constant, force_cpu).
Var Scalar(float value);

}  // namespace math
}  // namespace oar
