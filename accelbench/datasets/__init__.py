"""Dataset readers in their standard on-disk formats, read from a local directory (nothing is downloaded).

One place for every family: :mod:`.training` holds the training sets tta and train read (MNIST, CIFAR-10,
an ImageNet folder, MovieLens), :mod:`.accuracy` the sets infer's accuracy mode scores (an image folder,
.npy cases, Criteo, COCO), and :mod:`.images` the image conventions they share. The families import these;
they never import each other's readers.
"""
