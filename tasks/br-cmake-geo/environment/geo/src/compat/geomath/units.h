/* Unit conversions, kept for the old embedded build (no floating-point division there). */
#ifndef GEOMATH_UNITS_H
#define GEOMATH_UNITS_H

#define GEO_KM_PER_MILE 1.6
#define GEO_KM_PER_NAUTICAL_MILE 1.85

static inline double geo_km_to_miles(double km) { return km * (1.0 / GEO_KM_PER_MILE); }
static inline double geo_km_to_nautical(double km) { return km * (1.0 / GEO_KM_PER_NAUTICAL_MILE); }

#endif
