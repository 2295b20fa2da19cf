// Host version of CuPy's `float16` (cupy/float16.cuh): 16 bits of storage, arithmetic in float.
// Like CuPy's class it converts implicitly to float only, is built implicitly from float and
// explicitly from the other arithmetic types, and rounds to nearest-even when it stores a value
// (straight from a double too, as cuda_fp16's __double2half does).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace standin_half {

// IEEE binary16 bits of `value`, rounded to nearest-even; a NaN gives 0x7fff, as __float2half does.
inline uint16_t from_double(double value) {
    if (std::isnan(value)) return 0x7fffu;
    const uint16_t sign = std::signbit(value) ? 0x8000u : 0u;
    const double a = std::fabs(value);
    if (a >= 65520.0) return sign | 0x7c00u;  // 65520 is halfway to 2^16: rounds up to infinity
    if (a < 0x1p-14) {  // subnormal: a multiple of 2^-24 (2^-14 itself is reached by the carry)
        return sign | static_cast<uint16_t>(std::nearbyint(a * 0x1p24));
    }
    int exponent;
    std::frexp(a, &exponent);  // a = m * 2^exponent with m in [0.5, 1)
    const double mantissa = std::ldexp(a, 1 - exponent) - 1.0;  // in [0, 1), exactly
    uint32_t bits = static_cast<uint32_t>(exponent + 14) << 10;
    bits += static_cast<uint32_t>(std::nearbyint(mantissa * 1024.0));  // a carry bumps the exponent
    return sign | static_cast<uint16_t>(bits);
}

inline float to_float(uint16_t bits) {
    const float sign = (bits & 0x8000u) ? -1.0f : 1.0f;
    const int exponent = (bits >> 10) & 0x1f;
    const int mantissa = bits & 0x3ff;
    if (exponent == 0x1f) {
        return mantissa ? std::numeric_limits<float>::quiet_NaN() : sign * std::numeric_limits<float>::infinity();
    }
    if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -24);
    return sign * std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
}

}  // namespace standin_half

class float16 {
public:
    float16() {}
    float16(float v) : bits_(standin_half::from_double(v)) {}

    explicit float16(bool v) : bits_(standin_half::from_double(v)) {}
    explicit float16(double v) : bits_(standin_half::from_double(v)) {}
    explicit float16(int v) : bits_(standin_half::from_double(v)) {}
    explicit float16(unsigned int v) : bits_(standin_half::from_double(v)) {}
    explicit float16(long long v) : bits_(standin_half::from_double(static_cast<double>(v))) {}
    explicit float16(unsigned long long v) : bits_(standin_half::from_double(static_cast<double>(v))) {}

    operator float() const { return standin_half::to_float(bits_); }

    float16& operator=(const float16&) = default;

    template <typename T>
    float16& operator=(const T& rhs) {
        *this = static_cast<float16>(rhs);
        return *this;
    }

    template <typename T> float16& operator+=(const T& rhs) { return *this = *this + rhs; }
    template <typename T> float16& operator-=(const T& rhs) { return *this = *this - rhs; }
    template <typename T> float16& operator*=(const T& rhs) { return *this = *this * rhs; }
    template <typename T> float16& operator/=(const T& rhs) { return *this = *this / rhs; }

    static float16 from_bits(uint16_t bits) {
        float16 out;
        out.bits_ = bits;
        return out;
    }
    uint16_t to_bits() const { return bits_; }

    int iszero() const { return (bits_ & 0x7fffu) == 0; }
    int isnan() const { return (bits_ & 0x7c00u) == 0x7c00u && (bits_ & 0x03ffu) != 0; }
    int isinf() const { return (bits_ & 0x7fffu) == 0x7c00u; }
    int isfinite() const { return (bits_ & 0x7c00u) != 0x7c00u; }
    int signbit() const { return (bits_ & 0x8000u) != 0; }

private:
    uint16_t bits_;
};

static_assert(sizeof(float16) == 2, "float16 must be stored in 16 bits, as NumPy's float16");

inline float16 min(float16 x, float16 y) { return float16(std::fmin(float(x), float(y))); }
inline float16 max(float16 x, float16 y) { return float16(std::fmax(float(x), float(y))); }
inline float16 fmin(float16 x, float16 y) { return float16(std::fmin(float(x), float(y))); }
inline float16 fmax(float16 x, float16 y) { return float16(std::fmax(float(x), float(y))); }
inline int iszero(float16 x) { return x.iszero(); }
inline int isnan(float16 x) { return x.isnan(); }
inline int isinf(float16 x) { return x.isinf(); }
inline int isfinite(float16 x) { return x.isfinite(); }
inline int signbit(float16 x) { return x.signbit(); }
