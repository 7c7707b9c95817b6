// 1.2 x 0.9 rectangle in triangles; haloflow extrudes it one cell thick
lc = 0.3;
Point(1) = {0, 0, 0, lc}; Point(2) = {1.2, 0, 0, lc};
Point(3) = {1.2, 0.9, 0, lc}; Point(4) = {0, 0.9, 0, lc};
Line(1) = {1, 2}; Line(2) = {2, 3}; Line(3) = {3, 4}; Line(4) = {4, 1};
Curve Loop(1) = {1, 2, 3, 4};
Plane Surface(1) = {1};
Physical Curve("inlet") = {4};
Physical Curve("outlet") = {2};
Physical Curve("walls") = {1, 3};
Physical Surface("fluid") = {1};
