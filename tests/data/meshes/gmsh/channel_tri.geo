// 2 x 1 plane channel in unstructured triangles, 20 cells across (element size 1/20);
// haloflow extrudes it one cell thick into triangular prisms
lc = 0.05;
Point(1) = {0, 0, 0, lc}; Point(2) = {2, 0, 0, lc};
Point(3) = {2, 1, 0, lc}; Point(4) = {0, 1, 0, lc};
Line(1) = {1, 2}; Line(2) = {2, 3}; Line(3) = {3, 4}; Line(4) = {4, 1};
Curve Loop(1) = {1, 2, 3, 4};
Plane Surface(1) = {1};
Physical Curve("inlet") = {4};
Physical Curve("outlet") = {2};
Physical Curve("walls") = {1, 3};
Physical Surface("fluid") = {1};
