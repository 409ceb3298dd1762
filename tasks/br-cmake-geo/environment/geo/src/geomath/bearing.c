#include <math.h>
#include <geomath/geo.h>
#include "internal.h"

double geo_bearing_deg(geo_point a, geo_point b) {
    double p1 = geo_rad(a.lat), p2 = geo_rad(b.lat), dl = geo_rad(b.lon - a.lon);
    double y = sin(dl) * cos(p2);
    double x = cos(p1) * sin(p2) - sin(p1) * cos(p2) * cos(dl);
    double deg = fmod(geo_deg(atan2(y, x)) + 360.0, 360.0);
    return deg;
}
