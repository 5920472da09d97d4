# Runs moto's server with DynamoDB's item size rule as AWS applies it.
#
# moto 5.2.5 (the pinned stand-in) refuses an UpdateItem by adding the new
# value of an attribute to the item *including the value it replaces*, and
# counts a binary value by its base64 text (a third more than its bytes).
# DynamoDB counts the item as it will be after the update, binary values by
# their bytes. Without this, an item DynamoDB accepts is refused locally
# once an attribute of it is rewritten at more than about half the limit.
#
# It also keeps a table's stream readable across a cancelled transaction.
# moto rolls a cancelled TransactWriteItems back by putting deep copies of
# the tables in place, stream included, while the shard iterators consumers
# already hold point at the replaced stream object: they never see another
# record (a DynamoDB Streams consumer stops at the first conflict). Here the
# live stream object stays the table's, cut back to where it was before the
# transaction (dropping records of the cancelled writes, as AWS never
# emits them). Nothing else of moto is changed.
import base64
import sys

from moto.dynamodb.models import dynamo_type
from moto.dynamodb.models.utilities import bytesize
from moto.dynamodb.exceptions import ItemSizeTooLarge

_size = dynamo_type.DynamoType.size


def size(self):
    if self.type == "B" and isinstance(self.value, str):
        try:
            return len(base64.b64decode(self.value))
        except Exception:  # not base64: count it as moto does
            return bytesize(self.value)
    return _size(self)


def item_size(key, value):
    return bytesize(key) + (value.size() if type(value) is dynamo_type.DynamoType else bytesize(str(value)))


def setitem(self, key, value):
    after = sum(item_size(k, v) for k, v in self.items() if k != key) + item_size(key, value)
    if after > 405000:  # moto's limit, which it measured on AWS (400 KB plus names)
        raise ItemSizeTooLarge
    dict.__setitem__(self, key, value)


dynamo_type.DynamoType.size = size
dynamo_type.LimitedSizeDict.__setitem__ = setitem

from moto.dynamodb.models import DynamoDBBackend

_transact_write_items = DynamoDBBackend.transact_write_items


def transact_write_items(self, transact_items):
    streams = {}
    for item in transact_items:
        _, op = next(iter(item.items()))
        name = op.get("TableName")
        table = self.tables.get(name) if name else None
        shard = getattr(table, "stream_shard", None) if table is not None else None
        if shard is not None and name not in streams:
            streams[name] = (shard, len(shard.items))
    try:
        return _transact_write_items(self, transact_items)
    except Exception:
        for name, (shard, length) in streams.items():
            del shard.items[length:]
            restored = self.tables.get(name)
            if restored is not None and restored.stream_shard is not shard:
                restored.stream_shard = shard
                shard.table = restored
        raise


DynamoDBBackend.transact_write_items = transact_write_items

if __name__ == "__main__":
    from moto.server import main

    sys.exit(main(sys.argv[1:]))
