// Host C++ stand-ins for what a CuPy elementwise kernel's CUDA source expects: the CUDA keywords,
// CuPy's CArray / CIndexer / CUPY_FOR (cupy/carray.cuh), and CUDA's math overloads. The kernel
// source itself is CuPy's, unchanged; kernels.py compiles it with this header in front.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#define __device__
#define __host__
#define __global__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))

// A GPU thread per element becomes one host loop over the elements, in order.
#define CUPY_FOR(i, n) for (ptrdiff_t i = 0; i < (n); ++i)

// An array argument: data pointer, shape and byte strides, as cupy/carray.cuh lays it out.
// `arr[_ind.get()]` addresses by a multi-index; `arr[i]` (raw params) by a flat C-order index.
template <typename T, int _ndim, bool _c_contiguous = false, bool _use_32bit_indexing = false,
          int _core_ndim = 0>
class CArray {
public:
    static const int ndim = _ndim;
    static const bool c_contiguous = _c_contiguous;

    CArray(T* data, const long long* shape, const long long* strides) : data_(data), size_(1) {
        for (int dim = 0; dim < ndim; ++dim) {
            shape_[dim] = shape[dim];
            strides_[dim] = strides[dim];
            size_ *= shape[dim];
        }
    }

    T* data() const { return data_; }
    ptrdiff_t size() const { return size_; }
    const ptrdiff_t* shape() const { return shape_; }
    const ptrdiff_t* strides() const { return strides_; }

    T& operator[](const ptrdiff_t (&index)[ndim > 0 ? ndim : 1]) const {
        ptrdiff_t offset = 0;
        for (int dim = 0; dim < ndim; ++dim) offset += strides_[dim] * index[dim];
        return *reinterpret_cast<T*>(reinterpret_cast<char*>(data_) + offset);
    }

    T& operator[](ptrdiff_t flat) const {
        if (c_contiguous) return data_[flat];
        ptrdiff_t offset = 0;
        for (int dim = ndim - 1; dim > 0; --dim) {
            offset += strides_[dim] * (flat % shape_[dim]);
            flat /= shape_[dim];
        }
        if (ndim > 0) offset += strides_[0] * flat;
        return *reinterpret_cast<T*>(reinterpret_cast<char*>(data_) + offset);
    }

private:
    T* data_;
    ptrdiff_t size_;
    ptrdiff_t shape_[ndim > 0 ? ndim : 1];
    ptrdiff_t strides_[ndim > 0 ? ndim : 1];
};

// The loop index: `_ind.size()` elements, `_ind.set(i)` turns a flat index into a multi-index.
template <int _ndim, bool _use_32bit_indexing = false>
class CIndexer {
public:
    static const int ndim = _ndim;

    explicit CIndexer(const long long* shape) : size_(1) {
        for (int dim = 0; dim < ndim; ++dim) {
            shape_[dim] = shape[dim];
            index_[dim] = 0;
            size_ *= shape[dim];
        }
    }

    ptrdiff_t size() const { return size_; }
    const ptrdiff_t (&get() const)[ndim > 0 ? ndim : 1] { return index_; }

    void set(ptrdiff_t i) {
        for (int dim = ndim - 1; dim > 0; --dim) {
            index_[dim] = i % shape_[dim];
            i /= shape_[dim];
        }
        if (ndim > 0) index_[0] = i;
    }

private:
    ptrdiff_t size_;
    ptrdiff_t shape_[ndim > 0 ? ndim : 1];
    ptrdiff_t index_[ndim > 0 ? ndim : 1];
};

// CUDA's device math: float and double overloads of the C functions (std:: brings the float ones).
using std::abs; using std::acos; using std::acosh; using std::asin; using std::asinh; using std::atan;
using std::atan2; using std::atanh; using std::cbrt; using std::ceil; using std::copysign; using std::cos;
using std::cosh; using std::erf; using std::erfc; using std::exp; using std::exp2; using std::expm1;
using std::fabs; using std::floor; using std::fma; using std::fmax; using std::fmin; using std::fmod;
using std::hypot; using std::isfinite; using std::isinf; using std::isnan; using std::lgamma; using std::log;
using std::log10; using std::log1p; using std::log2; using std::nextafter; using std::pow; using std::round;
using std::signbit; using std::sin; using std::sinh; using std::sqrt; using std::tan; using std::tanh;
using std::tgamma; using std::trunc;

inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float rsqrt(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float exp10f(float x) { return std::pow(10.0f, x); }
inline float exp10(float x) { return std::pow(10.0f, x); }
inline double exp10(double x) { return std::pow(10.0, x); }
inline float normcdff(float x) { return 0.5f * std::erfc(-x * 0.70710678118654752f); }
inline float normcdf(float x) { return normcdff(x); }
inline double normcdf(double x) { return 0.5 * std::erfc(-x * 0.70710678118654752); }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }

// CUDA's min/max: the integer ones compare, the floating ones are fmin/fmax (a NaN loses).
#define STANDIN_INT_MIN_MAX(type) \
    inline type min(type a, type b) { return a < b ? a : b; } \
    inline type max(type a, type b) { return a > b ? a : b; }
STANDIN_INT_MIN_MAX(int)
STANDIN_INT_MIN_MAX(unsigned int)
STANDIN_INT_MIN_MAX(long long)
STANDIN_INT_MIN_MAX(unsigned long long)
#undef STANDIN_INT_MIN_MAX
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }
inline double min(double a, double b) { return std::fmin(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }
inline double min(float a, double b) { return std::fmin(double(a), b); }
inline double max(float a, double b) { return std::fmax(double(a), b); }
inline double min(double a, float b) { return std::fmin(a, double(b)); }
inline double max(double a, float b) { return std::fmax(a, double(b)); }

// cupy/math_constants.h
#define CUDART_INF_F std::numeric_limits<float>::infinity()
#define CUDART_NAN_F std::numeric_limits<float>::quiet_NaN()
#define CUDART_INF std::numeric_limits<double>::infinity()
#define CUDART_NAN std::numeric_limits<double>::quiet_NaN()
#define CUDART_PI 3.1415926535897931e+0
#define CUDART_PI_F 3.141592654f

// CUDA's -ftz=true flushes single-precision denormals to zero, inputs and results. On the host the
// SSE control register's FTZ (results) and DAZ (inputs) bits do it, but for double precision too,
// which CUDA leaves alone: so kernels.py turns them on only for kernels without float64 arrays.
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
class standin_flush_denormals {
public:
    explicit standin_flush_denormals(bool on) : saved_(_mm_getcsr()) {
        if (on) _mm_setcsr(saved_ | 0x8040u);  // FTZ (bit 15) | DAZ (bit 6)
    }
    ~standin_flush_denormals() { _mm_setcsr(saved_); }
private:
    unsigned int saved_;
};
#else
#error "the CuPy stand-in emulates CUDA's flush-to-zero on x86 hosts only"
#endif

#ifndef M_PI
#define M_PI 3.1415926535897932384626433832795
#endif
