#ifndef GEOMATH_GEO_H
#define GEOMATH_GEO_H

typedef struct {
    double lat;   /* degrees, -90..90 */
    double lon;   /* degrees, -180..180 */
} geo_point;

/* Great-circle distance (haversine formula, mean Earth radius 6371.0 km). */
double geo_haversine_km(geo_point a, geo_point b);

/* Initial bearing from a to b in degrees, 0 <= result < 360 (0 = north, 90 = east). */
double geo_bearing_deg(geo_point a, geo_point b);

#endif
