"""Makes PySpark 4 find kafkatx's data source by itself: ``spark.read.format("kafkatx")`` with no
``spark.dataSource.register`` call.

PySpark imports every top-level module whose name starts with ``pyspark_`` and registers its
``DefaultSource`` under ``DefaultSource.name()``.  It does so in every session on a machine where kafkatx is
installed, whatever the job, so a failing import here must not break that lookup: without a working
kafkatx (or pyspark) this module just offers no source, and ``kafkatx.spark.register(spark)`` shows why.
"""

try:
    from kafkatx.spark import KafkaLogDataSource as DefaultSource
except ImportError:  # pragma: no cover - only without a usable kafkatx / pyspark
    pass
else:
    __all__ = ["DefaultSource"]
