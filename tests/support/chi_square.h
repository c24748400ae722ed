#pragma once
// Pearson's chi-square goodness-of-fit for tests of randomness (the draw's permutations, a
// `random` room's admissions), and its critical value. Header-only, so the unit tests use it
// without linking tests/support.
//
// A test of randomness fails falsely with the probability it was given: pick p so that this is
// negligible (1e-6: once in a million runs), and derive the test's seeds deterministically, so
// a run is reproducible anyway (a given build either always passes or always fails).

#include <cmath>
#include <cstdint>
#include <vector>

namespace anteroom::testing {

// Pearson's statistic of counts against the same expected count in every cell:
// sum of (observed - expected)^2 / expected.
inline double ChiSquare(const std::vector<int64_t>& observed, double expected_each) {
  double sum = 0;
  for (int64_t o : observed) {
    const double d = static_cast<double>(o) - expected_each;
    sum += d * d / expected_each;
  }
  return sum;
}

// The z with P(Z > z) = p for a standard normal Z (0 < p < 1/2), by bisection on erfc: to
// within 1e-12, which is all the critical value below needs.
inline double NormalUpperQuantile(double p) {
  double lo = 0, hi = 40;
  for (int i = 0; i < 200 && hi - lo > 1e-12; ++i) {
    const double mid = (lo + hi) / 2;
    if (0.5 * std::erfc(mid / std::sqrt(2.0)) > p) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return (lo + hi) / 2;
}

// The chi-square critical value c with P(X > c) ~= p for X chi-square with `dof` degrees of
// freedom, by the Wilson-Hilferty approximation: (X/k)^(1/3) is nearly normal with mean
// 1 - 2/(9k) and variance 2/(9k), so c = k (1 - 2/(9k) + z_p sqrt(2/(9k)))^3.
//
// For the small p of tests it errs on the safe side: the exact tail beyond it is below p
// (computed with mpmath: p = 1e-6 gives 1.6e-7 at 1 dof, 6.1e-7 at 9, 7.9e-7 at 23, 9.2e-7 at
// 81; p = 1e-5 gives 7.3e-6 at 9, 8.6e-6 at 23), so a test's false-failure rate is at most p.
inline double ChiSquareCritical(double p, int dof) {
  const double k = dof;
  const double a = 2.0 / (9.0 * k);
  const double t = 1.0 - a + NormalUpperQuantile(p) * std::sqrt(a);
  return k * t * t * t;
}

}  // namespace anteroom::testing
