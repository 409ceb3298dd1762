#ifndef GEOMATH_INTERNAL_H
#define GEOMATH_INTERNAL_H

#define GEO_PI 3.14159265358979323846
#define GEO_EARTH_RADIUS_KM 6371.0

static inline double geo_rad(double deg) { return deg * GEO_PI / 180.0; }
static inline double geo_deg(double rad) { return rad * 180.0 / GEO_PI; }

#endif
