"""The SM count that sizes the decode grid: read from the device once, a fixed stand-in off CUDA."""

from types import SimpleNamespace

import torch

from serving.kernels import sm_count as sm


def test_without_cuda_the_fallback_count_stands_in(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert sm.sm_count() == sm.FALLBACK_SMS
    assert sm.sm_count(0) == sm.FALLBACK_SMS
    assert sm.sm_count("cpu") == sm.FALLBACK_SMS


def test_the_device_count_is_read_once_per_device(monkeypatch):
    reads = []

    def properties(index):
        reads.append(index)
        return SimpleNamespace(multi_processor_count=100 + index)

    sm._device_sms.cache_clear()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_properties", properties)
    try:
        assert sm.sm_count() == 101
        assert sm.sm_count("cuda:1") == 101
        assert sm.sm_count(torch.device("cuda", 0)) == 100
        assert sm.sm_count("cuda") == 101  # no index: the current device
        assert sm.sm_count() == 101
        assert reads == [1, 0]
    finally:
        sm._device_sms.cache_clear()


def test_decode_splits_follow_the_device_sm_count(monkeypatch):
    from serving.kernels import paged_decode

    plans = {}
    for sms in (16, 132):
        monkeypatch.setattr(paged_decode, "sm_count", lambda device=None, n=sms: n)
        plans[sms] = paged_decode.choose_num_splits(1, 8, 40960)
    # 8 programs: split until two waves fill the device (32 programs on 16 SMs, 264 on 132)
    assert plans == {16: 4, 132: 64}
