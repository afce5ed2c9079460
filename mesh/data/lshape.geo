// The L-shape [0,2]^2 minus (1,2]^2: area 3, perimeter 8. Physical curves
// "inlet" (x = 0) and "walls" (the rest), physical surface "domain".
// Mesh size 0.15 (a few hundred triangles). Regenerate with mesh/data/generate.sh.
h = 0.15;
Point(1) = {0, 0, 0, h};
Point(2) = {2, 0, 0, h};
Point(3) = {2, 1, 0, h};
Point(4) = {1, 1, 0, h};
Point(5) = {1, 2, 0, h};
Point(6) = {0, 2, 0, h};
Line(1) = {1, 2};
Line(2) = {2, 3};
Line(3) = {3, 4};
Line(4) = {4, 5};
Line(5) = {5, 6};
Line(6) = {6, 1};
Curve Loop(1) = {1, 2, 3, 4, 5, 6};
Plane Surface(1) = {1};
Physical Curve("inlet") = {6};
Physical Curve("walls") = {1, 2, 3, 4, 5};
Physical Surface("domain") = {1};
