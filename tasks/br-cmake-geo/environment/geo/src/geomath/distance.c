#include <math.h>
#include <geomath/geo.h>
#include "internal.h"

double geo_haversine_km(geo_point a, geo_point b) {
    double p1 = geo_rad(a.lat), p2 = geo_rad(b.lat);
    double dp = p2 - p1, dl = geo_rad(b.lon - a.lon);
    double h = sin(dp / 2) * sin(dp / 2) + cos(p1) * cos(p2) * sin(dl / 2) * sin(dl / 2);
    if (h > 1.0) h = 1.0;
    return 2.0 * GEO_EARTH_RADIUS_KM * asin(sqrt(h));
}
