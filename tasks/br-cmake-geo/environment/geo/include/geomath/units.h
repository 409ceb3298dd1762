#ifndef GEOMATH_UNITS_H
#define GEOMATH_UNITS_H

#define GEO_KM_PER_MILE 1.609344          /* international mile */
#define GEO_KM_PER_NAUTICAL_MILE 1.852

static inline double geo_km_to_miles(double km) { return km / GEO_KM_PER_MILE; }
static inline double geo_km_to_nautical(double km) { return km / GEO_KM_PER_NAUTICAL_MILE; }

#endif
