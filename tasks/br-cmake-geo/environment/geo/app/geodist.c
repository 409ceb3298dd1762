/* geodist: reads "LAT1 LON1 LAT2 LON2" lines, prints distance and initial bearing. */
#include <stdio.h>
#include <geomath/geo.h>
#include <geomath/units.h>

int main(void) {
    char line[256];
    while (fgets(line, sizeof line, stdin)) {
        geo_point a, b;
        char extra;
        int n = sscanf(line, "%lf %lf %lf %lf %c", &a.lat, &a.lon, &b.lat, &b.lon, &extra);
        if (n != 4 || a.lat < -90 || a.lat > 90 || b.lat < -90 || b.lat > 90 ||
            a.lon < -180 || a.lon > 180 || b.lon < -180 || b.lon > 180) {
            puts("error");
            continue;
        }
        double km = geo_haversine_km(a, b);
        printf("%.3f km %.3f mi %.3f nmi %.1f deg\n", km, geo_km_to_miles(km),
               geo_km_to_nautical(km), geo_bearing_deg(a, b));
    }
    return 0;
}
