//! placeholder: being written
pub struct NatsBus;
impl NatsBus {
    pub async fn connect(_url: &str) -> Result<Self, super::BusError> {
        Err(super::BusError::Closed)
    }
}
#[async_trait::async_trait]
impl super::Bus for NatsBus {
    fn backend(&self) -> &'static str { "nats" }
    fn max_payload(&self) -> usize { 0 }
    async fn publish(&self, _: &str, _: bytes::Bytes) -> Result<(), super::BusError> { Err(super::BusError::Closed) }
    async fn subscribe(&self, _: &str) -> Result<super::Subscription, super::BusError> { Err(super::BusError::Closed) }
    async fn queue_subscribe(&self, _: &str, _: &str) -> Result<super::Subscription, super::BusError> { Err(super::BusError::Closed) }
    async fn request(&self, _: &str, _: bytes::Bytes, _: std::time::Duration) -> Result<bytes::Bytes, super::BusError> { Err(super::BusError::Closed) }
    async fn durable_publish(&self, _: &str, _: bytes::Bytes) -> Result<(), super::BusError> { Err(super::BusError::Closed) }
    async fn durable_consume(&self, _: &str, _: super::DurableOptions) -> Result<super::DurableConsumer, super::BusError> { Err(super::BusError::Closed) }
    async fn flush(&self) -> Result<(), super::BusError> { Ok(()) }
}
