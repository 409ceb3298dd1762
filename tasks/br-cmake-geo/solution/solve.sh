#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
set -e
cd /app/geo
# wrong source name, wrong include dir, misspelled target, missing libm, and a global include of
# src/compat that shadows include/geomath/units.h with outdated conversion factors
cat > CMakeLists.txt <<'CM'
cmake_minimum_required(VERSION 3.16)
project(geo C)

set(CMAKE_C_STANDARD 99)
set(CMAKE_C_STANDARD_REQUIRED ON)

add_library(geomath STATIC
    src/geomath/distance.c
    src/geomath/bearing.c
)
target_include_directories(geomath PUBLIC include)
target_link_libraries(geomath PUBLIC m)

add_executable(geodist app/geodist.c)
target_link_libraries(geodist PRIVATE geomath)
CM
rm -rf build
cmake -S . -B build
cmake --build build
echo "51.5 -0.12 48.85 2.35" | build/geodist
