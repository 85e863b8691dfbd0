"""Build of the compiled modules (metadata is in setup.cfg).

``scrapy_recrawl.change._walk`` walks lxml's element tree in C through lxml's
public C API, so it is built against lxml's bundled headers;
``scrapy_recrawl.change._hashes`` hashes what the walk hands over (JSON leaves, the
shingle simhash; its hashing, ``_hashes.pxd``, is compiled into both);
``scrapy_recrawl.change._diff`` is the element diff; ``scrapy_recrawl.scoring._em``
the freshness estimate's EM step.
"""

import lxml
from Cython.Build import cythonize
from setuptools import Extension, setup

setup(
    ext_modules=cythonize(
        [
            Extension(
                "scrapy_recrawl.change._walk",
                ["scrapy_recrawl/change/_walk.pyx"],
                include_dirs=lxml.get_include(),
            ),
            Extension("scrapy_recrawl.change._hashes", ["scrapy_recrawl/change/_hashes.pyx"]),
            Extension("scrapy_recrawl.change._diff", ["scrapy_recrawl/change/_diff.pyx"]),
            Extension("scrapy_recrawl.scoring._em", ["scrapy_recrawl/scoring/_em.pyx"]),
        ],
        language_level=3,
    )
)
